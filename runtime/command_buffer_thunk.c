/* The command-buffer thunk and the conversion of thunk sequences (command_buffer_thunk.h). */
#include "runtime/command_buffer_thunk.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/thunk_internal.h"

kiln_status kiln_command_buffer_thunk_create(const char *name, kiln_thunk_seq_t *seq,
                                             kiln_thunk_t **out) {
  if (!seq || !out) return KILN_ERR_INVALID("command buffer thunk: NULL argument");
  *out = NULL;
  for (size_t i = 0; i < seq->len; i++)
    if (!kiln_thunk_is_convertible(seq->items[i]))
      return KILN_ERR_INVALID("command buffer %s: %s thunk %s cannot be recorded", name ? name : "",
                              kiln_thunk_kind_name(seq->items[i]->kind), seq->items[i]->name);
  kiln_thunk_t *t = kiln_calloc(1, sizeof(*t));
  t->kind = KILN_THUNK_COMMAND_BUFFER;
  t->name = kiln_strdup(name ? name : "command-buffer");
  t->u.cmdbuf.seq = *seq;
  memset(seq, 0, sizeof(*seq));
  kiln_cmd_list_init(&t->u.cmdbuf.own.list);
  atomic_init(&t->u.cmdbuf.last_action, KILN_CMD_ACTION_ISSUE_DIRECTLY);
  *out = t;
  return NULL;
}

kiln_cmd_action_t kiln_command_buffer_thunk_last_action(const kiln_thunk_t *t) {
  if (!t || t->kind != KILN_THUNK_COMMAND_BUFFER) return KILN_CMD_ACTION_ISSUE_DIRECTLY;
  return (kiln_cmd_action_t)atomic_load_explicit(&t->u.cmdbuf.last_action, memory_order_relaxed);
}

static void set_last_action(kiln_thunk_t *t, kiln_cmd_action_t a) {
  atomic_store_explicit(&t->u.cmdbuf.last_action, (int)a, memory_order_relaxed);
}

void kiln_cmdbuf_run_init(kiln_cmdbuf_run_t *run, const kiln_thunk_t *t) {
  int n = t->u.cmdbuf.num_allocs;
  /* Without room for the bases (the allocation refused) the run never replays: every
   * execution records its commands again (remember_bases, bases_unchanged). */
  kiln_devptr_t *bases = kiln_try_realloc(run->bases, (size_t)(n ? n : 1) * sizeof(kiln_devptr_t));
  if (!bases) kiln_free(run->bases);
  run->bases = bases;
  memset(&run->ticket, 0, sizeof(run->ticket)); /* bases not yet known */
}

void kiln_cmdbuf_run_free(kiln_cmdbuf_run_t *run) {
  kiln_cmd_list_free(&run->list);
  kiln_free(run->bases);
  memset(run, 0, sizeof(*run));
}

/* Adds allocation `a` to those the commands use; false without host memory. */
static bool note_alloc(kiln_thunk_t *cb, int32_t a) {
  for (int i = 0; i < cb->u.cmdbuf.num_allocs; i++)
    if (cb->u.cmdbuf.allocs[i] == a) return true;
  int32_t *allocs = kiln_try_realloc(cb->u.cmdbuf.allocs,
                                     (size_t)(cb->u.cmdbuf.num_allocs + 1) * sizeof(int32_t));
  if (!allocs) return false;
  cb->u.cmdbuf.allocs = allocs;
  cb->u.cmdbuf.allocs[cb->u.cmdbuf.num_allocs++] = a;
  return true;
}

kiln_status kiln_command_buffer_thunk_prepare(kiln_thunk_t *t,
                                              const kiln_thunk_prepare_params_t *p) {
  KILN_RETURN_IF_ERROR(kiln_thunk_seq_prepare(&t->u.cmdbuf.seq, p), "in command buffer %s",
                       t->name);
  /* The commands' addresses are the bases of these allocations plus fixed offsets. */
  t->u.cmdbuf.num_allocs = 0;
  bool ok = true;
  for (size_t i = 0; i < t->u.cmdbuf.seq.len; i++) {
    const kiln_thunk_t *c = t->u.cmdbuf.seq.items[i];
    switch (c->kind) {
      case KILN_THUNK_KERNEL:
        for (int a = 0; a < c->u.kernel.num_args; a++)
          if (!c->u.kernel.args[a].is_scalar)
            ok &= note_alloc(t, c->u.kernel.args[a].slice.allocation);
        break;
      case KILN_THUNK_COPY:
        ok &= note_alloc(t, c->u.copy.src.allocation);
        ok &= note_alloc(t, c->u.copy.dst.allocation);
        break;
      case KILN_THUNK_MEMSET:
        ok &= note_alloc(t, c->u.memset.dst.allocation);
        break;
      case KILN_THUNK_GEMM:
        ok &= note_alloc(t, c->u.gemm.a.allocation);
        ok &= note_alloc(t, c->u.gemm.b.allocation);
        ok &= note_alloc(t, c->u.gemm.c.allocation);
        break;
      case KILN_THUNK_CUSTOM_CALL:
        for (int a = 0; a < c->u.custom.num_operands; a++)
          ok &= note_alloc(t, c->u.custom.operands[a].allocation);
        for (int a = 0; a < c->u.custom.num_results; a++)
          ok &= note_alloc(t, c->u.custom.results[a].allocation);
        break;
      default:
        break;
    }
  }
  if (!ok)
    return KILN_ERR_EXHAUSTED("command buffer %s: out of host memory for its allocations", t->name);
  kiln_cmdbuf_run_init(&t->u.cmdbuf.own, t);
  return NULL;
}

/* True when every allocation the commands use has the base it had at the launch of `run`'s
 * ticket. */
static bool bases_unchanged(const kiln_thunk_t *t, const kiln_cmdbuf_run_t *run,
                            const kiln_buffer_table_t *b) {
  if (!run->ticket.entry_id || !run->bases) return false;
  for (int i = 0; i < t->u.cmdbuf.num_allocs; i++) {
    int32_t a = t->u.cmdbuf.allocs[i];
    if (a < 0 || a >= b->num || b->bases[a] != run->bases[i]) return false;
  }
  return true;
}

static void remember_bases(const kiln_thunk_t *t, kiln_cmdbuf_run_t *run,
                           const kiln_buffer_table_t *b, const kiln_cmd_ticket_t *ticket) {
  run->ticket = *ticket;
  if (!run->bases) run->ticket.entry_id = 0;
  for (int i = 0; i < t->u.cmdbuf.num_allocs && run->ticket.entry_id; i++)
    run->bases[i] = b->bases[t->u.cmdbuf.allocs[i]]; /* valid: the list resolved */
}

kiln_status kiln_command_buffer_thunk_initialize(kiln_thunk_t *t,
                                                 const kiln_thunk_init_params_t *p) {
  KILN_RETURN_IF_ERROR(kiln_thunk_seq_initialize(&t->u.cmdbuf.seq, p), "in command buffer %s",
                       t->name);
  t->u.cmdbuf.use_cache = kiln_device_cmd_cache(p->device) != NULL;
  return NULL;
}

kiln_status kiln_command_buffer_thunk_execute(kiln_thunk_t *t, const kiln_thunk_exec_params_t *p) {
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(p->device);
  if (!t->u.cmdbuf.use_cache || !cache ||
      (p->profile && kiln_thunk_profile_mode(p->profile) == KILN_THUNK_PROFILE_COMMANDS)) {
    set_last_action(t, KILN_CMD_ACTION_ISSUE_DIRECTLY);
    return kiln_thunk_seq_execute(&t->u.cmdbuf.seq, p);
  }
  kiln_cmdbuf_run_t *run =
      p->state ? kiln_thunk_exec_state_cmdbuf_run(p->state, t) : &t->u.cmdbuf.own;
  if (!run)
    return kiln_status_make(KILN_FAILED_PRECONDITION,
                            "command buffer %s is not part of the execution state's thunks",
                            t->name);
  /* Custom-call commands read this execution's run info from the run's cell when they run.
   * Written only when it changed: an earlier launch of this run (a loop's previous iteration)
   * may still be reading it, and then it holds the same values. */
  const kiln_run_info_t *ri = p->state ? kiln_thunk_exec_state_run(p->state) : NULL;
  kiln_run_info_t now = {0, NULL, 0};
  if (ri) now = *ri;
  if (now.run_id != run->run_info.run_id || now.user_data != run->run_info.user_data ||
      now.num_user_data != run->run_info.num_user_data)
    run->run_info = now;
  if (bases_unchanged(t, run, p->buffers)) {
    /* Same allocations at the same addresses: the commands this run launched last time are
     * exactly right, if the shared entry still holds them (its generation says so). */
    bool replayed = false;
    KILN_RETURN_IF_ERROR(kiln_cmd_cache_replay(cache, p->stream, &run->ticket, &replayed),
                         "in command buffer %s", t->name);
    if (replayed) {
      set_last_action(t, KILN_CMD_ACTION_REPLAY);
      return NULL;
    }
  }
  /* The list keeps its capacity, so the steady state does not allocate. */
  kiln_cmd_list_t *l = &run->list;
  kiln_cmd_list_clear(l);
  for (size_t i = 0; i < t->u.cmdbuf.seq.len; i++)
    KILN_RETURN_IF_ERROR(kiln_thunk_append_commands(t->u.cmdbuf.seq.items[i], p->buffers, l),
                         "in command buffer %s", t->name);
  if (l->refused)
    return KILN_ERR_EXHAUSTED("command buffer %s: out of host memory for its commands", t->name);
  for (size_t i = 0; i < l->len; i++)
    if (l->cmds[i].kind == KILN_CMD_CUSTOM_CALL) l->cmds[i].run = &run->run_info;
  kiln_cmd_ticket_t ticket;
  kiln_cmd_action_t action = KILN_CMD_ACTION_ISSUE_DIRECTLY;
  kiln_status s = kiln_cmd_cache_execute_ex(cache, p->stream, l, &action, &ticket);
  set_last_action(t, action);
  if (s) return kiln_status_annotate(s, "in command buffer %s", t->name);
  remember_bases(t, run, p->buffers, &ticket);
  return NULL;
}

static kiln_status convert_children(kiln_thunk_t *t, size_t min_run, size_t *made) {
  switch (t->kind) {
    case KILN_THUNK_WHILE:
      KILN_RETURN_IF_ERROR_PLAIN(kiln_command_buffer_convert(&t->u.loop.cond, min_run, made));
      return kiln_command_buffer_convert(&t->u.loop.body, min_run, made);
    case KILN_THUNK_CONDITIONAL:
      for (int i = 0; i < t->u.cond.num_branches; i++)
        KILN_RETURN_IF_ERROR_PLAIN(
            kiln_command_buffer_convert(&t->u.cond.branches[i], min_run, made));
      return NULL;
    case KILN_THUNK_SEQUENTIAL:
      return kiln_command_buffer_convert(&t->u.sequential.seq, min_run, made);
    default:
      return NULL;
  }
}

kiln_status kiln_command_buffer_convert(kiln_thunk_seq_t *seq, size_t min_run, size_t *made) {
  size_t local = 0;
  if (!made) made = &local;
  if (!seq) return KILN_ERR_INVALID("command buffer conversion: NULL sequence");
  if (min_run < 1) min_run = 1;
  kiln_thunk_seq_t out;
  kiln_thunk_seq_init(&out);
  size_t i = 0;
  kiln_status s = NULL;
  while (i < seq->len && !s) {
    size_t j = i;
    while (j < seq->len && kiln_thunk_is_convertible(seq->items[j])) j++;
    if (j - i >= min_run) {
      kiln_thunk_seq_t run;
      kiln_thunk_seq_init(&run);
      for (size_t k = i; k < j; k++) kiln_thunk_seq_push(&run, seq->items[k]);
      char name[64];
      snprintf(name, sizeof(name), "command_buffer.%zu", *made);
      kiln_thunk_t *cb = NULL;
      s = kiln_command_buffer_thunk_create(name, &run, &cb);
      if (s) { /* cannot happen for a convertible run; keep the thunks where they were */
        for (size_t k = 0; k < run.len; k++) kiln_thunk_seq_push(&out, run.items[k]);
        kiln_free(run.items);
        break;
      }
      kiln_thunk_seq_push(&out, cb);
      (*made)++;
      i = j;
    } else if (j > i) {
      for (; i < j; i++) kiln_thunk_seq_push(&out, seq->items[i]);
    } else {
      s = convert_children(seq->items[i], min_run, made);
      kiln_thunk_seq_push(&out, seq->items[i]);
      i++;
    }
  }
  for (; i < seq->len; i++) kiln_thunk_seq_push(&out, seq->items[i]);
  kiln_free(seq->items);
  *seq = out;
  return s;
}

void kiln_command_buffer_count(const kiln_thunk_seq_t *seq, kiln_command_buffer_counts_t *counts) {
  if (!seq || !counts) return;
  for (size_t i = 0; i < seq->len; i++) {
    const kiln_thunk_t *t = seq->items[i];
    switch (t->kind) {
      case KILN_THUNK_CUSTOM_CALL:
        counts->custom_calls_outside++;
        break;
      case KILN_THUNK_COMMAND_BUFFER:
        counts->command_buffers++;
        counts->thunks += t->u.cmdbuf.seq.len;
        for (size_t k = 0; k < t->u.cmdbuf.seq.len; k++)
          counts->custom_calls_inside += t->u.cmdbuf.seq.items[k]->kind == KILN_THUNK_CUSTOM_CALL;
        break;
      case KILN_THUNK_WHILE:
        kiln_command_buffer_count(&t->u.loop.cond, counts);
        kiln_command_buffer_count(&t->u.loop.body, counts);
        break;
      case KILN_THUNK_CONDITIONAL:
        for (int b = 0; b < t->u.cond.num_branches; b++)
          kiln_command_buffer_count(&t->u.cond.branches[b], counts);
        break;
      case KILN_THUNK_SEQUENTIAL:
        kiln_command_buffer_count(&t->u.sequential.seq, counts);
        break;
      default:
        break;
    }
  }
}
