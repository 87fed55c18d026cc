/* Replica-group text → explicit groups (see replica_groups.h). */
#include "compiler/hlo/replica_groups.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"

#define MAX_IDS (1 << 24)
#define MAX_DIMS 16

typedef KILN_VEC(int64_t) i64_vec_t;
typedef KILN_VEC(int) int_vec_t;

typedef struct {
  const char *text, *p;
} cursor_t;

static void skip_ws(cursor_t *c) {
  while (isspace((unsigned char)*c->p)) c->p++;
}

static bool eat(cursor_t *c, char ch) {
  skip_ws(c);
  if (*c->p != ch) return false;
  c->p++;
  return true;
}

static kiln_status syntax(const cursor_t *c, const char *what) {
  return KILN_ERR_INVALID(
      "replica_groups=%s: expected %s at offset %d; write {{0,1},{2,3}}, "
      "[G,S]<=[dims]T(perm) or mesh['axis'=N,...] {'axis',...}",
      c->text, what, (int)(c->p - c->text));
}

static bool read_int(cursor_t *c, int64_t *v) {
  skip_ws(c);
  char *end = NULL;
  if (!isdigit((unsigned char)*c->p)) return false;
  long long x = strtoll(c->p, &end, 10);
  if (x > MAX_IDS) return false;
  *v = x;
  c->p = end;
  return true;
}

/* `open` int (`,` int)* `close`, possibly empty. */
static kiln_status read_int_list(cursor_t *c, char open, char close, i64_vec_t *out) {
  if (!eat(c, open)) return syntax(c, open == '[' ? "'['" : open == '(' ? "'('" : "'{'");
  if (eat(c, close)) return KILN_STATUS_OK;
  do {
    int64_t v;
    if (!read_int(c, &v)) return syntax(c, "a non-negative integer");
    kiln_vec_push(out, v);
  } while (eat(c, ','));
  if (!eat(c, close)) return syntax(c, close == ']' ? "']'" : close == ')' ? "')'" : "'}'");
  return KILN_STATUS_OK;
}

static kiln_status parse_explicit(cursor_t *c, i64_vec_t *ids, int_vec_t *offsets) {
  if (!eat(c, '{')) return syntax(c, "'{'");
  kiln_vec_push(offsets, 0);
  if (eat(c, '}')) return KILN_STATUS_OK;
  do {
    KILN_RETURN_IF_ERROR_PLAIN(read_int_list(c, '{', '}', ids));
    kiln_vec_push(offsets, (int)ids->len);
  } while (eat(c, ','));
  if (!eat(c, '}')) return syntax(c, "'}'");
  return KILN_STATUS_OK;
}

/* The ids of iota(prod(dims)) reshaped to `dims` and transposed by `perm`, in row-major
 * order of the transposed array. */
static void transposed_iota(const int64_t *dims, const int64_t *perm, int rank, i64_vec_t *ids) {
  int64_t stride[MAX_DIMS], idx[MAX_DIMS] = {0}, total = 1;
  for (int d = rank - 1; d >= 0; d--) {
    stride[d] = total;
    total *= dims[d];
  }
  for (int64_t n = 0; n < total; n++) {
    int64_t id = 0;
    for (int k = 0; k < rank; k++) id += idx[k] * stride[perm[k]];
    kiln_vec_push(ids, id);
    for (int k = rank - 1; k >= 0; k--) { /* next index over the transposed dims */
      if (++idx[k] < dims[perm[k]]) break;
      idx[k] = 0;
    }
  }
}

static kiln_status check_perm(const cursor_t *c, const int64_t *perm, int rank) {
  bool seen[MAX_DIMS] = {0};
  for (int k = 0; k < rank; k++) {
    if (perm[k] < 0 || perm[k] >= rank || seen[perm[k]])
      return KILN_ERR_INVALID(
          "replica_groups=%s: the transpose is not a permutation of %d "
          "dimensions",
          c->text, rank);
    seen[perm[k]] = true;
  }
  return KILN_STATUS_OK;
}

static kiln_status parse_iota(cursor_t *c, i64_vec_t *ids, int_vec_t *offsets) {
  i64_vec_t shape = {0}, dims = {0}, perm = {0};
  kiln_status s = read_int_list(c, '[', ']', &shape);
  if (!s && !(eat(c, '<') && eat(c, '='))) s = syntax(c, "'<='");
  if (!s) s = read_int_list(c, '[', ']', &dims);
  if (!s && eat(c, 'T')) s = read_int_list(c, '(', ')', &perm);
  if (!s && (shape.len != 2 || dims.len == 0 || dims.len > MAX_DIMS))
    s = KILN_ERR_INVALID(
        "replica_groups=%s: the iota form needs [groups,size] and 1 to %d "
        "reshape dimensions",
        c->text, MAX_DIMS);
  int64_t total = 1;
  for (size_t d = 0; !s && d < dims.len; d++) {
    total *= dims.data[d];
    if (total > MAX_IDS) s = syntax(c, "fewer ids");
  }
  if (!s && shape.data[0] * shape.data[1] != total)
    s = KILN_ERR_INVALID(
        "replica_groups=%s: %lld groups of %lld ids need %lld ids, the iota "
        "has %lld",
        c->text, (long long)shape.data[0], (long long)shape.data[1],
        (long long)(shape.data[0] * shape.data[1]), (long long)total);
  if (!s && perm.len == 0)
    for (size_t d = 0; d < dims.len; d++) kiln_vec_push(&perm, (int64_t)d);
  if (!s && perm.len != dims.len)
    s = KILN_ERR_INVALID("replica_groups=%s: the transpose has %zu dimensions, the reshape %zu",
                         c->text, perm.len, dims.len);
  if (!s) s = check_perm(c, perm.data, (int)dims.len);
  if (!s) {
    transposed_iota(dims.data, perm.data, (int)dims.len, ids);
    for (int64_t g = 0; g <= shape.data[0]; g++) kiln_vec_push(offsets, (int)(g * shape.data[1]));
  }
  kiln_vec_free(&shape);
  kiln_vec_free(&dims);
  kiln_vec_free(&perm);
  return s;
}

/* 'name' → [start, end) of the name inside c->text. */
static bool read_quoted(cursor_t *c, const char **start, size_t *len) {
  if (!eat(c, '\'')) return false;
  *start = c->p;
  while (*c->p && *c->p != '\'') c->p++;
  if (*c->p != '\'') return false;
  *len = (size_t)(c->p - *start);
  c->p++;
  return true;
}

static kiln_status parse_mesh(cursor_t *c, i64_vec_t *ids, int_vec_t *offsets) {
  const char *names[MAX_DIMS];
  size_t lens[MAX_DIMS];
  int64_t dims[MAX_DIMS], perm[MAX_DIMS];
  bool listed[MAX_DIMS] = {0};
  int rank = 0, nlisted = 0;
  int64_t total = 1;
  if (!eat(c, '[')) return syntax(c, "'['");
  do {
    if (rank == MAX_DIMS) return syntax(c, "fewer mesh axes");
    if (!read_quoted(c, &names[rank], &lens[rank])) return syntax(c, "a quoted axis name");
    if (!eat(c, '=') || !read_int(c, &dims[rank]) || dims[rank] < 1)
      return syntax(c, "'=' and a positive axis size");
    total *= dims[rank++];
    if (total > MAX_IDS) return syntax(c, "fewer devices");
  } while (eat(c, ','));
  if (!eat(c, ']')) return syntax(c, "']'");
  if (!eat(c, '{')) return syntax(c, "'{' and the reduced axes");
  do {
    const char *n;
    size_t l;
    if (!read_quoted(c, &n, &l)) return syntax(c, "a quoted axis name");
    int d = 0;
    while (d < rank && !(lens[d] == l && memcmp(names[d], n, l) == 0)) d++;
    if (d == rank || listed[d])
      return KILN_ERR_INVALID(
          "replica_groups=%s: axis '%.*s' is not a mesh axis or is listed "
          "twice",
          c->text, (int)l, n);
    listed[d] = true;
    perm[rank - 1 - (nlisted++)] = d; /* fixed up below: listed axes go last, in order */
  } while (eat(c, ','));
  if (!eat(c, '}')) return syntax(c, "'}'");
  /* Reverse the listed tail into listing order; the other axes lead, in mesh order. */
  for (int i = 0; i < nlisted / 2; i++) {
    int64_t t = perm[rank - nlisted + i];
    perm[rank - nlisted + i] = perm[rank - 1 - i];
    perm[rank - 1 - i] = t;
  }
  int64_t group_size = 1;
  for (int d = 0, k = 0; d < rank; d++) {
    if (!listed[d])
      perm[k++] = d;
    else
      group_size *= dims[d];
  }
  transposed_iota(dims, perm, rank, ids);
  for (int64_t g = 0; g <= total / group_size; g++) kiln_vec_push(offsets, (int)(g * group_size));
  return KILN_STATUS_OK;
}

/* The first id of ids[first], ids[first + step], ... that appears twice, or -1. */
static int64_t first_repeat(const i64_vec_t *ids, size_t first, size_t step) {
  int64_t max = -1, repeat = -1;
  for (size_t i = 0; i < ids->len; i++)
    if (ids->data[i] > max) max = ids->data[i];
  bool *seen = kiln_calloc((size_t)max + 1, 1);
  for (size_t i = first; i < ids->len && repeat < 0; i += step) {
    if (seen[ids->data[i]]) repeat = ids->data[i];
    seen[ids->data[i]] = true;
  }
  kiln_free(seen);
  return repeat;
}

static kiln_status check_ids(const char *text, const i64_vec_t *ids) {
  int64_t r = first_repeat(ids, 0, 1);
  if (r >= 0)
    return KILN_ERR_INVALID(
        "replica_groups=%s: id %lld appears more than once; each "
        "participant belongs to one group",
        text, (long long)r);
  return KILN_STATUS_OK;
}

kiln_status kiln_hlo_replica_groups_parse(const char *text, kiln_hlo_replica_groups_t *out) {
  memset(out, 0, sizeof *out);
  cursor_t c = {text, text};
  i64_vec_t ids = {0};
  int_vec_t offsets = {0};
  skip_ws(&c);
  kiln_status s;
  if (*c.p == '{')
    s = parse_explicit(&c, &ids, &offsets);
  else if (*c.p == '[')
    s = parse_iota(&c, &ids, &offsets);
  else if (strncmp(c.p, "mesh", 4) == 0) {
    c.p += 4;
    s = parse_mesh(&c, &ids, &offsets);
  } else {
    s = syntax(&c, "'{', '[' or mesh");
  }
  skip_ws(&c);
  if (!s && *c.p) s = syntax(&c, "the end of the groups");
  if (!s) s = check_ids(text, &ids);
  if (s) {
    kiln_vec_free(&ids);
    kiln_vec_free(&offsets);
    return s;
  }
  out->num_groups = (int)offsets.len - 1;
  out->ids = ids.data;
  out->offsets = offsets.data;
  out->group_size = out->num_groups > 0 ? offsets.data[1] : -1;
  for (int g = 1; g < out->num_groups; g++)
    if (offsets.data[g + 1] - offsets.data[g] != out->group_size) out->group_size = -1;
  return KILN_STATUS_OK;
}

void kiln_hlo_replica_groups_free(kiln_hlo_replica_groups_t *g) {
  kiln_free(g->ids);
  kiln_free(g->offsets);
  memset(g, 0, sizeof *g);
}

kiln_status kiln_hlo_source_target_pairs_check(const char *text, int *num_pairs) {
  return kiln_hlo_source_target_pairs_parse(text, NULL, num_pairs);
}

kiln_status kiln_hlo_source_target_pairs_parse(const char *text, int64_t **out_pairs,
                                               int *num_pairs) {
  if (out_pairs) *out_pairs = NULL;
  cursor_t c = {text, text};
  i64_vec_t ids = {0};
  int_vec_t offsets = {0};
  kiln_status s = parse_explicit(&c, &ids, &offsets);
  skip_ws(&c);
  if (!s && *c.p) s = syntax(&c, "the end of the pairs");
  for (size_t g = 0; !s && g + 1 < offsets.len; g++)
    if (offsets.data[g + 1] - offsets.data[g] != 2)
      s = KILN_ERR_INVALID("source_target_pairs=%s: pair %zu has %d ids; write {source,target}",
                           text, g, offsets.data[g + 1] - offsets.data[g]);
  for (size_t side = 0; !s && side < 2; side++) {
    int64_t r = first_repeat(&ids, side, 2);
    if (r >= 0)
      s = KILN_ERR_INVALID("source_target_pairs=%s: %s %lld appears more than once", text,
                           side == 0 ? "source" : "target", (long long)r);
  }
  *num_pairs = s ? 0 : (int)ids.len / 2;
  if (!s && out_pairs) {
    *out_pairs = ids.data;
    ids.data = NULL;
  }
  kiln_vec_free(&ids);
  kiln_vec_free(&offsets);
  return s;
}
