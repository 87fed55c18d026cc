/* Growable arrays on the kiln allocator.
 *
 *   KILN_VEC(int) v = {0};
 *   kiln_vec_push(&v, 3);
 *   for (size_t i = 0; i < v.len; i++) use(v.data[i]);
 *   kiln_vec_free(&v);
 *
 * The vector owns `data`; copying the struct copies the pointer, not the elements. */
#ifndef KILN_BASE_VEC_H_
#define KILN_BASE_VEC_H_

#include <stddef.h>
#include <string.h>

#include "base/alloc.h"

#define KILN_VEC(T) struct { T *data; size_t len, cap; }

/* Ensures capacity for `n` elements in total. */
#define kiln_vec_reserve(v, n)                                                      \
  do {                                                                              \
    if ((n) > (v)->cap) {                                                           \
      size_t kiln__c = (v)->cap ? (v)->cap * 2 : 8;                                 \
      while (kiln__c < (n)) kiln__c *= 2;                                           \
      (v)->data = kiln_realloc((v)->data, kiln__c * sizeof(*(v)->data));            \
      (v)->cap = kiln__c;                                                           \
    }                                                                               \
  } while (0)

#define kiln_vec_push(v, x)                \
  do {                                     \
    kiln_vec_reserve((v), (v)->len + 1);   \
    (v)->data[(v)->len++] = (x);           \
  } while (0)

#define kiln_vec_pop(v) ((v)->data[--(v)->len])
#define kiln_vec_last(v) ((v)->data[(v)->len - 1])
#define kiln_vec_clear(v) ((v)->len = 0)

#define kiln_vec_free(v)    \
  do {                      \
    kiln_free((v)->data);   \
    (v)->data = NULL;       \
    (v)->len = (v)->cap = 0; \
  } while (0)

#endif /* KILN_BASE_VEC_H_ */
