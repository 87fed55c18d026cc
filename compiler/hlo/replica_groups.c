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
      "[G,S]<=[dims]T(perm) or mesh['axis'=N,...] {'axis','axis':(pre)size,...}",
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
    if (!read_int(c, &v)) return syntax(c, "a non-negative integer up to 16777216");
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

/* 'name' or name (XLA prints both) → [start, end) of the name inside c->text. */
static bool read_name(cursor_t *c, const char **start, size_t *len) {
  skip_ws(c);
  if (*c->p == '\'') {
    c->p++;
    *start = c->p;
    while (*c->p && *c->p != '\'') c->p++;
    if (*c->p != '\'') return false;
    *len = (size_t)(c->p - *start);
    c->p++;
    return true;
  }
  *start = c->p;
  while (isalnum((unsigned char)*c->p) || *c->p == '_') c->p++;
  *len = (size_t)(c->p - *start);
  return *len > 0;
}

/* One axis of a mesh's group list: mesh axis `axis`, the whole of it or its sub-axis
 * (pre)size: the axis of n devices seen as [pre][size][n / (pre * size)], major to minor. */
typedef struct {
  int axis;
  int64_t pre, size;
  bool whole;
} axis_ref_t;

/* The sub-axes of each mesh axis cut it at the products pre and pre * size; between two
 * neighbouring cuts lies one factor of the axis (the major one first). `cuts` gets the sorted
 * distinct cuts of axis `d` (1 and its size included); returns how many. */
static int axis_cuts(const axis_ref_t *refs, int nrefs, int d, int64_t n, int64_t *cuts) {
  int k = 0;
  cuts[k++] = 1;
  cuts[k++] = n;
  for (int r = 0; r < nrefs; r++) {
    if (refs[r].axis != d || refs[r].whole) continue;
    int64_t add[2] = {refs[r].pre, refs[r].pre * refs[r].size};
    for (int i = 0; i < 2; i++) {
      int j = 0;
      while (j < k && cuts[j] != add[i]) j++;
      if (j == k) cuts[k++] = add[i];
    }
  }
  for (int i = 1; i < k; i++) /* insertion sort: a handful */
    for (int j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
      int64_t t = cuts[j];
      cuts[j] = cuts[j - 1];
      cuts[j - 1] = t;
    }
  return k;
}

/* The ids must be each of 0 .. total-1 once. */
static kiln_status check_device_ids(const cursor_t *c, const i64_vec_t *dev, int64_t total) {
  if ((int64_t)dev->len != total)
    return KILN_ERR_INVALID("replica_groups=%s: device_ids has %zu ids, the mesh %lld devices",
                            c->text, dev->len, (long long)total);
  bool *seen = kiln_calloc((size_t)total, 1);
  int64_t bad = -1;
  for (size_t i = 0; i < dev->len && bad < 0; i++) {
    if (dev->data[i] >= total || seen[dev->data[i]])
      bad = dev->data[i];
    else
      seen[dev->data[i]] = true;
  }
  kiln_free(seen);
  if (bad >= 0)
    return KILN_ERR_INVALID(
        "replica_groups=%s: device_ids must hold each of 0..%lld once; %lld is out of range or "
        "repeated",
        c->text, (long long)(total - 1), (long long)bad);
  return KILN_STATUS_OK;
}

/* device_ids=(LIST) after a mesh's axes: the device at each position of the mesh, row-major.
 * LIST is XLA's print of the mesh's device array: [r0,r1,...]T(p0,...) (iota over prod(r),
 * reshaped to r, transposed by p; a leading [dims]<= is accepted too) or the ids written out. */
static kiln_status parse_device_ids(cursor_t *c, int64_t total, i64_vec_t *dev) {
  skip_ws(c);
  if (strncmp(c->p, "device_ids", 10) != 0) return syntax(c, "device_ids=(...) after the mesh");
  c->p += 10;
  if (!eat(c, '=')) return syntax(c, "'=' after device_ids");
  const char *list = c->p;
  if (!eat(c, '(')) return syntax(c, "'(' after device_ids=");
  skip_ws(c);
  if (*c->p != '[') {
    c->p = list;
    KILN_RETURN_IF_ERROR_PLAIN(read_int_list(c, '(', ')', dev));
    return check_device_ids(c, dev, total);
  }
  i64_vec_t dims = {0}, perm = {0};
  kiln_status s = read_int_list(c, '[', ']', &dims);
  if (!s && eat(c, '<')) {
    int64_t n = 1;
    size_t d = 0;
    for (; d < dims.len && n <= total; d++) n *= dims.data[d];
    bool cut = d < dims.len; /* n is then only a lower bound */
    if (!eat(c, '='))
      s = syntax(c, "'<='");
    else if (n != total)
      s = KILN_ERR_INVALID("replica_groups=%s: device_ids' shape holds %s%lld ids, the mesh %lld",
                           c->text, cut ? "more than " : "", (long long)(cut ? total : n),
                           (long long)total);
    dims.len = 0;
    if (!s) s = read_int_list(c, '[', ']', &dims);
  }
  if (!s && eat(c, 'T')) s = read_int_list(c, '(', ')', &perm);
  if (!s && !eat(c, ')')) s = syntax(c, "')' after device_ids");
  int64_t n = 1;
  for (size_t d = 0; !s && d < dims.len && n <= total; d++) n *= dims.data[d];
  if (!s && (dims.len == 0 || dims.len > MAX_DIMS || n != total))
    s = KILN_ERR_INVALID(
        "replica_groups=%s: device_ids' iota needs 1 to %d dimensions holding the mesh's %lld "
        "devices",
        c->text, MAX_DIMS, (long long)total);
  if (!s && perm.len == 0)
    for (size_t d = 0; d < dims.len; d++) kiln_vec_push(&perm, (int64_t)d);
  if (!s && perm.len != dims.len)
    s = KILN_ERR_INVALID(
        "replica_groups=%s: device_ids' transpose has %zu dimensions, its iota %zu", c->text,
        perm.len, dims.len);
  if (!s) s = check_perm(c, perm.data, (int)dims.len);
  if (!s) transposed_iota(dims.data, perm.data, (int)dims.len, dev);
  kiln_vec_free(&dims);
  kiln_vec_free(&perm);
  return s;
}

/* mesh['a'=N,...][, device_ids=(...)] {'a','b':(pre)size,...}: the devices of the mesh
 * (row-major positions; device_ids says which device sits at each, iota without it), grouped
 * over the listed axes and sub-axes (in listing order, the first major); the other axes lead.
 * `{}` lists none: every device is a group of its own. *dev gets the device ids (caller frees). */
static kiln_status parse_mesh(cursor_t *c, i64_vec_t *ids, int_vec_t *offsets, i64_vec_t *dev) {
  const char *names[MAX_DIMS];
  size_t lens[MAX_DIMS];
  int64_t dims[MAX_DIMS];
  int rank = 0;
  int64_t total = 1;
  if (!eat(c, '[')) return syntax(c, "'['");
  do {
    if (rank == MAX_DIMS) return syntax(c, "fewer mesh axes");
    if (!read_name(c, &names[rank], &lens[rank])) return syntax(c, "an axis name");
    for (int d = 0; d < rank; d++)
      if (lens[d] == lens[rank] && memcmp(names[d], names[rank], lens[d]) == 0)
        return KILN_ERR_INVALID("replica_groups=%s: mesh axis '%.*s' is named twice", c->text,
                                (int)lens[d], names[d]);
    if (!eat(c, '=') || !read_int(c, &dims[rank]) || dims[rank] < 1)
      return syntax(c, "'=' and a positive axis size");
    total *= dims[rank++];
    if (total > MAX_IDS) return syntax(c, "fewer devices");
  } while (eat(c, ','));
  if (!eat(c, ']')) return syntax(c, "']'");
  if (eat(c, ',')) KILN_RETURN_IF_ERROR_PLAIN(parse_device_ids(c, total, dev));
  if (!eat(c, '{')) return syntax(c, "'{' and the reduced axes");
  axis_ref_t refs[MAX_DIMS];
  int nrefs = 0;
  for (bool more = !eat(c, '}'); more; more = eat(c, ',')) {
    const char *n;
    size_t l;
    if (nrefs == MAX_DIMS) return syntax(c, "fewer axes in the group");
    if (!read_name(c, &n, &l)) return syntax(c, "an axis name");
    int d = 0;
    while (d < rank && !(lens[d] == l && memcmp(names[d], n, l) == 0)) d++;
    if (d == rank)
      return KILN_ERR_INVALID("replica_groups=%s: axis '%.*s' is not a mesh axis", c->text, (int)l,
                              n);
    axis_ref_t r = {d, 1, dims[d], true};
    if (eat(c, ':')) {
      if (!eat(c, '(') || !read_int(c, &r.pre) || !eat(c, ')') || !read_int(c, &r.size))
        return syntax(c, "a sub-axis :(pre-size)size");
      r.whole = false;
      if (r.pre < 1 || r.size < 2 || r.size >= dims[d] || dims[d] % (r.pre * r.size) != 0)
        return KILN_ERR_INVALID(
            "replica_groups=%s: sub-axis '%.*s':(%lld)%lld of an axis of %lld: the size must be "
            "2 or more and below the axis's, pre-size x size must divide it",
            c->text, (int)l, n, (long long)r.pre, (long long)r.size, (long long)dims[d]);
    }
    for (int o = 0; o < nrefs; o++) {
      const axis_ref_t *q = &refs[o];
      if (q->axis == d &&
          (q->whole || r.whole || (q->pre < r.pre * r.size && r.pre < q->pre * q->size)))
        return KILN_ERR_INVALID(
            "replica_groups=%s: axis '%.*s' is listed twice or its sub-axes overlap", c->text,
            (int)l, n);
    }
    refs[nrefs++] = r;
  }
  if (nrefs && !eat(c, '}')) return syntax(c, "'}'");
  /* Every mesh axis in factors between its cuts: dims of an expanded mesh, major first. */
  int64_t fdims[MAX_DIMS], cuts[2 * MAX_DIMS + 2];
  int first[MAX_DIMS], frank = 0; /* first[d]: the first factor of axis d */
  for (int d = 0; d < rank; d++) {
    int k = axis_cuts(refs, nrefs, d, dims[d], cuts);
    first[d] = frank;
    for (int j = 0; j + 1 < k; j++) {
      if (cuts[j + 1] % cuts[j] != 0)
        return KILN_ERR_INVALID(
            "replica_groups=%s: the sub-axes of axis '%.*s' do not nest (%lld does not divide "
            "%lld)",
            c->text, (int)lens[d], names[d], (long long)cuts[j], (long long)cuts[j + 1]);
      if (frank == MAX_DIMS) return syntax(c, "fewer axes and sub-axes");
      fdims[frank++] = cuts[j + 1] / cuts[j];
    }
  }
  /* The listed factors go last in listing order; the others lead in mesh order. */
  bool listed[MAX_DIMS] = {0};
  int64_t perm[MAX_DIMS], listed_perm[MAX_DIMS], group_size = 1;
  for (int r = 0; r < nrefs; r++) {
    int f = first[refs[r].axis];
    if (!refs[r].whole) {
      int k = axis_cuts(refs, nrefs, refs[r].axis, dims[refs[r].axis], cuts);
      for (int j = 0; j < k && cuts[j] != refs[r].pre; j++) f++;
    }
    listed[f] = true;
    listed_perm[r] = f;
    group_size *= fdims[f];
  }
  int np = 0;
  for (int f = 0; f < frank; f++)
    if (!listed[f]) perm[np++] = f;
  for (int r = 0; r < nrefs; r++) perm[np++] = listed_perm[r];
  transposed_iota(fdims, perm, frank, ids);
  for (size_t i = 0; i < dev->len; i++) ids->data[i] = dev->data[ids->data[i]];
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
    i64_vec_t dev = {0};
    s = parse_mesh(&c, &ids, &offsets, &dev);
    kiln_vec_free(&dev);
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
