/* kiln's loader of relocatable x86-64 ELF objects (host_elf.h). Written from the ELF-64
 * object file format (section headers, symbol table, RELA entries) and the x86-64 psABI's
 * relocation table (the calculations S + A, S + A - P, G + GOT + A - P, ... below). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "compiler/backend/host_elf.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hashmap.h"

#if defined(__x86_64__) && defined(__linux__)
#define KILN_HOST_ELF_SUPPORTED 1
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>
#else
#define KILN_HOST_ELF_SUPPORTED 0
#endif

struct kiln_host_elf {
  void *base; /* the mapping */
  size_t size;
  void **frames; /* the .eh_frame sections registered with the unwinder */
  int num_frames;
  void (*deregister)(void *);
  kiln_hashmap_t symbols; /* global/weak definitions: name -> address (boxed) */
  uintptr_t *addresses;   /* the boxes */
};

static pthread_once_t g_self_once = PTHREAD_ONCE_INIT;
static void *g_self;

static void open_self(void) {
  g_self = dlopen(NULL, RTLD_LAZY);
}

void *kiln_host_elf_process_symbol(void *user, const char *name) {
  (void)user;
  kiln_once(&g_self_once, open_self);
  return g_self ? dlsym(g_self, name) : NULL;
}

size_t kiln_host_elf_mapped_bytes(const kiln_host_elf_t *img) {
  return img ? img->size : 0;
}

kiln_status kiln_host_elf_lookup(const kiln_host_elf_t *img, const char *name, void **out_addr) {
  if (out_addr) *out_addr = NULL;
  if (!img || !name || !out_addr) return KILN_ERR_INVALID("kiln_host_elf_lookup: NULL argument");
  const uintptr_t *a = kiln_hashmap_get(&img->symbols, name, strlen(name));
  if (!a)
    return kiln_status_make(KILN_NOT_FOUND, "symbol '%s' not defined by the loaded objects", name);
  if (!*a) return kiln_status_make(KILN_NOT_FOUND, "symbol '%s' resolved to a null address", name);
  *out_addr = (void *)*a;
  return NULL;
}

void kiln_host_elf_destroy(kiln_host_elf_t *img) {
  if (!img) return;
#if KILN_HOST_ELF_SUPPORTED
  for (int i = img->num_frames - 1; i >= 0; i--) img->deregister(img->frames[i]);
  if (img->base) munmap(img->base, img->size);
#endif
  kiln_free(img->frames);
  kiln_hashmap_free(&img->symbols);
  kiln_free(img->addresses);
  kiln_free(img);
}

#if !KILN_HOST_ELF_SUPPORTED

kiln_status kiln_host_elf_load(const void *const *objects, const size_t *sizes, int n,
                               kiln_host_elf_resolver_t resolve, void *user,
                               kiln_host_elf_t **out) {
  (void)objects, (void)sizes, (void)n, (void)resolve, (void)user;
  if (out) *out = NULL;
  return KILN_ERR_UNIMPLEMENTED("kiln's ELF loader runs on x86-64 Linux hosts only");
}

#else

enum { SEG_TEXT, SEG_RO, SEG_RW, NUM_SEGS };
#define PAGE 4096u
#define MAX_IMAGE_BYTES ((uint64_t)1 << 30)
#define STUB_BYTES 8u /* ff 25 rel32 (jmp *GOT(%rip)), padded with int3 */

/* One object being loaded. */
typedef struct obj {
  const uint8_t *b;
  size_t n;
  int index;
  Elf64_Shdr *sh; /* copies of the section headers */
  uint32_t nsh;
  uint32_t symtab; /* its index; 0: none */
  uint64_t nsyms;
  const char *strtab; /* the symbol names (bounds: strtab_len) */
  uint64_t strtab_len;
  int8_t *seg; /* per section: SEG_*, or -1 when not loaded */
  uint8_t *eh; /* per section: an unwind table (.eh_frame) */
  int num_eh;
  uint64_t *offset;  /* per section: offset inside its segment */
  uintptr_t *sym;    /* per symbol: its address */
  int64_t *got;      /* per symbol: GOT slot, or -1 */
  int64_t *stub;     /* per symbol: call stub, or -1 */
  uint8_t *external; /* per symbol: 1 resolved outside the mapping, 2 in a section not loaded */
} obj_t;

static void obj_free(obj_t *o) {
  kiln_free(o->sh);
  kiln_free(o->seg);
  kiln_free(o->eh);
  kiln_free(o->offset);
  kiln_free(o->sym);
  kiln_free(o->got);
  kiln_free(o->stub);
  kiln_free(o->external);
}

/* The loader's own records (section and symbol tables, the definitions' map, the published
 * symbols) are allocated fallibly: a refusal is RESOURCE_EXHAUSTED, nothing leaks. */
#define OUT_OF_MEMORY(what) KILN_ERR_EXHAUSTED("kiln's ELF loader: out of host memory for %s", what)

#define BAD(o, ...) kiln_status_annotate(KILN_ERR_INVALID(__VA_ARGS__), "ELF object %d", (o)->index)
#define UNSUPPORTED(o, ...) \
  kiln_status_annotate(KILN_ERR_UNIMPLEMENTED(__VA_ARGS__), "ELF object %d", (o)->index)

static Elf64_Sym read_sym(const obj_t *o, uint64_t i) {
  Elf64_Sym s;
  memcpy(&s, o->b + o->sh[o->symtab].sh_offset + i * sizeof(Elf64_Sym), sizeof s);
  return s;
}

/* The symbol's name, or NULL when its offset is out of the string table or unterminated. */
static const char *sym_name(const obj_t *o, const Elf64_Sym *s) {
  if (s->st_name >= o->strtab_len) return NULL;
  const char *p = o->strtab + s->st_name;
  return memchr(p, 0, o->strtab_len - s->st_name) ? p : NULL;
}

static const char *section_name(const obj_t *o, uint32_t i, const char *shstr, uint64_t len) {
  uint32_t off = o->sh[i].sh_name;
  if (!shstr || off >= len || !memchr(shstr + off, 0, len - off)) return "";
  return shstr + off;
}

/* Whether [off, off + size) lies inside the object. */
static bool in_file(const obj_t *o, uint64_t off, uint64_t size) {
  return off <= o->n && size <= o->n - off;
}

/* Header, section headers, the symbol table; which sections load into which segment. */
static kiln_status parse(obj_t *o) {
  Elf64_Ehdr eh;
  if (o->n < sizeof eh) return BAD(o, "%zu bytes: shorter than an ELF header", o->n);
  memcpy(&eh, o->b, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG)) return BAD(o, "not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return UNSUPPORTED(o, "not a little-endian ELF64 object");
  if (eh.e_type != ET_REL)
    return UNSUPPORTED(o, "ELF type %u, not a relocatable object", eh.e_type);
  if (eh.e_machine != EM_X86_64) return UNSUPPORTED(o, "ELF machine %u, not x86-64", eh.e_machine);
  if (eh.e_shnum == 0 || eh.e_shstrndx == SHN_XINDEX)
    return UNSUPPORTED(o, "extended section numbering");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return BAD(o, "section header size %u", eh.e_shentsize);
  if (!in_file(o, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
    return BAD(o, "section headers past the end (truncated?)");
  o->nsh = eh.e_shnum;
  o->sh = kiln_try_malloc(o->nsh * sizeof(Elf64_Shdr));
  o->seg = kiln_try_malloc(o->nsh);
  o->eh = kiln_try_calloc(o->nsh, 1);
  o->offset = kiln_try_calloc(o->nsh, sizeof(uint64_t));
  if (!o->sh || !o->seg || !o->eh || !o->offset) return OUT_OF_MEMORY("section tables");
  memcpy(o->sh, o->b + eh.e_shoff, o->nsh * sizeof(Elf64_Shdr));
  const char *shstr = NULL;
  uint64_t shstr_len = 0;
  if (eh.e_shstrndx != SHN_UNDEF && eh.e_shstrndx < o->nsh &&
      o->sh[eh.e_shstrndx].sh_type == SHT_STRTAB &&
      in_file(o, o->sh[eh.e_shstrndx].sh_offset, o->sh[eh.e_shstrndx].sh_size)) {
    shstr = (const char *)o->b + o->sh[eh.e_shstrndx].sh_offset;
    shstr_len = o->sh[eh.e_shstrndx].sh_size;
  }
  for (uint32_t i = 0; i < o->nsh; i++) {
    const Elf64_Shdr *s = &o->sh[i];
    const char *name = section_name(o, i, shstr, shstr_len);
    o->seg[i] = -1;
    if (i == 0) continue;
    if (s->sh_type != SHT_NOBITS && !in_file(o, s->sh_offset, s->sh_size))
      return BAD(o, "section %u (%s) past the end of the object", i, name);
    switch (s->sh_type) {
      case SHT_GROUP:
        return UNSUPPORTED(o, "section group %s (COMDAT)", name);
      case SHT_REL:
        return UNSUPPORTED(o, "SHT_REL relocations in %s", name);
      case SHT_SYMTAB_SHNDX:
        return UNSUPPORTED(o, "extended symbol section indices");
      case SHT_INIT_ARRAY:
      case SHT_FINI_ARRAY:
      case SHT_PREINIT_ARRAY:
        return UNSUPPORTED(o, "constructor/destructor array %s", name);
      case SHT_SYMTAB:
        if (o->symtab) return UNSUPPORTED(o, "two symbol tables");
        o->symtab = i;
        break;
      default:
        break;
    }
    if (!(s->sh_flags & SHF_ALLOC)) continue;
    if (s->sh_flags & SHF_TLS) return UNSUPPORTED(o, "thread-local section %s", name);
    if (s->sh_flags & (SHF_GROUP | SHF_COMPRESSED))
      return UNSUPPORTED(o, "grouped or compressed section %s", name);
    bool eh = s->sh_type == SHT_X86_64_UNWIND || !strcmp(name, ".eh_frame");
    if (!strncmp(name, ".init", 5) || !strncmp(name, ".fini", 5) || !strncmp(name, ".ctors", 6) ||
        !strncmp(name, ".dtors", 6))
      return UNSUPPORTED(o, "start-up/shutdown section %s", name);
    if (s->sh_type == SHT_NOTE) continue; /* .note.gnu.property: nothing to map */
    if (s->sh_type != SHT_PROGBITS && s->sh_type != SHT_NOBITS && !eh)
      return UNSUPPORTED(o, "allocated section %s of type %#x", name, s->sh_type);
    uint64_t align = s->sh_addralign ? s->sh_addralign : 1;
    if (align & (align - 1))
      return BAD(o, "section %s: alignment %llu", name, (unsigned long long)align);
    if (align > PAGE)
      return UNSUPPORTED(o, "section %s aligned to %llu bytes", name, (unsigned long long)align);
    if (s->sh_size > MAX_IMAGE_BYTES)
      return UNSUPPORTED(o, "section %s of %llu bytes", name, (unsigned long long)s->sh_size);
    if (eh) {
      if (s->sh_type == SHT_NOBITS || (s->sh_flags & (SHF_WRITE | SHF_EXECINSTR)))
        return UNSUPPORTED(o, "unwind table %s that is not read-only data", name);
      o->eh[i] = 1;
      o->num_eh++;
    }
    o->seg[i] = eh                              ? SEG_RO
                : (s->sh_flags & SHF_EXECINSTR) ? SEG_TEXT
                : (s->sh_flags & SHF_WRITE)     ? SEG_RW
                                                : SEG_RO;
  }
  if (!o->symtab) return NULL; /* nothing to relocate or look up */
  const Elf64_Shdr *st = &o->sh[o->symtab];
  if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_size % sizeof(Elf64_Sym))
    return BAD(o, "symbol table entry size %llu", (unsigned long long)st->sh_entsize);
  if (st->sh_link == 0 || st->sh_link >= o->nsh || o->sh[st->sh_link].sh_type != SHT_STRTAB)
    return BAD(o, "symbol table without a string table");
  o->nsyms = st->sh_size / sizeof(Elf64_Sym);
  o->strtab = (const char *)o->b + o->sh[st->sh_link].sh_offset;
  o->strtab_len = o->sh[st->sh_link].sh_size;
  size_t nsyms = o->nsyms ? (size_t)o->nsyms : 1;
  o->sym = kiln_try_calloc(nsyms, sizeof(uintptr_t));
  o->got = kiln_try_calloc(nsyms, sizeof(int64_t));
  o->stub = kiln_try_calloc(nsyms, sizeof(int64_t));
  o->external = kiln_try_calloc(nsyms, 1);
  if (!o->sym || !o->got || !o->stub || !o->external) return OUT_OF_MEMORY("symbol tables");
  for (uint64_t i = 0; i < o->nsyms; i++) o->got[i] = o->stub[i] = -1;
  return NULL;
}

/* Checks a RELA section `r` of `o`: entries, symbol table, target. *target the section it
 * patches, or 0 when that is not loaded (its relocations are skipped). */
static kiln_status check_rela(const obj_t *o, uint32_t r, uint32_t *target) {
  const Elf64_Shdr *s = &o->sh[r];
  *target = 0;
  if (s->sh_entsize != sizeof(Elf64_Rela) || s->sh_size % sizeof(Elf64_Rela))
    return BAD(o, "relocation section %u: entry size %llu", r, (unsigned long long)s->sh_entsize);
  if (s->sh_info >= o->nsh) return BAD(o, "relocation section %u: target %u", r, s->sh_info);
  if (o->seg[s->sh_info] < 0) return NULL;
  if (!o->symtab || s->sh_link != o->symtab)
    return BAD(o, "relocation section %u: symbol table %u", r, s->sh_link);
  *target = s->sh_info;
  return NULL;
}

static Elf64_Rela read_rela(const obj_t *o, uint32_t r, uint64_t i) {
  Elf64_Rela e;
  memcpy(&e, o->b + o->sh[r].sh_offset + i * sizeof e, sizeof e);
  return e;
}

static bool needs_got(uint32_t type) {
  return type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
         type == R_X86_64_REX_GOTPCRELX || type == R_X86_64_GOT64 || type == R_X86_64_GOTPCREL64;
}

static bool is_plt(uint32_t type) {
  return type == R_X86_64_PLT32 || type == R_X86_64_PLTOFF64;
}

typedef struct loader {
  obj_t *objs;
  int n;
  kiln_hashmap_t defs; /* name -> 1 + (object << 32 | symbol) */
  uint64_t seg_size[NUM_SEGS], seg_base[NUM_SEGS];
  uint64_t got_slots, stubs;
  uint8_t *map;
  size_t map_size;
  kiln_host_elf_resolver_t resolve;
  void *user;
} loader_t;

/* Global and weak definitions of every object (a global wins over a weak one). */
static kiln_status collect_definitions(loader_t *L) {
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint64_t i = 1; i < o->nsyms; i++) {
      Elf64_Sym s = read_sym(o, i);
      int bind = ELF64_ST_BIND(s.st_info);
      if ((bind != STB_GLOBAL && bind != STB_WEAK) || s.st_shndx == SHN_UNDEF) continue;
      const char *name = sym_name(o, &s);
      if (!name) return BAD(o, "symbol %llu: name out of the string table", (unsigned long long)i);
      if (!*name) continue;
      uintptr_t v = 1 + (((uintptr_t)k << 32) | (uintptr_t)i);
      uintptr_t old = (uintptr_t)kiln_hashmap_get(&L->defs, name, strlen(name));
      if (old) {
        const obj_t *po = &L->objs[(old - 1) >> 32];
        Elf64_Sym ps = read_sym(po, (old - 1) & 0xffffffffu);
        bool prev_weak = ELF64_ST_BIND(ps.st_info) == STB_WEAK;
        if (bind == STB_WEAK) continue;
        if (!prev_weak)
          return kiln_status_make(KILN_ALREADY_EXISTS, "symbol '%s' defined by objects %d and %d",
                                  name, po->index, o->index);
      }
      if (!kiln_hashmap_try_put(&L->defs, name, strlen(name), (void *)v))
        return OUT_OF_MEMORY("the definitions' map");
    }
  }
  return NULL;
}

/* Whether undefined symbol `s` of `o` is defined by one of the objects. */
static bool defined_inside(const loader_t *L, const obj_t *o, const Elf64_Sym *s) {
  const char *name = sym_name(o, s);
  return name && kiln_hashmap_get(&L->defs, name, strlen(name)) != NULL;
}

/* Section offsets per segment; GOT slots and call stubs the relocations need. */
static kiln_status lay_out(loader_t *L) {
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint32_t i = 1; i < o->nsh; i++) {
      if (o->seg[i] < 0) continue;
      uint64_t align = o->sh[i].sh_addralign ? o->sh[i].sh_addralign : 1;
      uint64_t *size = &L->seg_size[o->seg[i]];
      *size = (*size + align - 1) & ~(align - 1);
      o->offset[i] = *size;
      *size += o->sh[i].sh_size + (o->eh[i] ? 4 : 0); /* an unwind table ends with a zero word */
      if (*size > MAX_IMAGE_BYTES)
        return UNSUPPORTED(o, "more than %llu bytes to map", (unsigned long long)MAX_IMAGE_BYTES);
    }
    for (uint32_t r = 1; r < o->nsh; r++) {
      if (o->sh[r].sh_type != SHT_RELA) continue;
      uint32_t target = 0;
      KILN_RETURN_IF_ERROR_PLAIN(check_rela(o, r, &target));
      if (!target) continue;
      uint64_t count = o->sh[r].sh_size / sizeof(Elf64_Rela);
      for (uint64_t j = 0; j < count; j++) {
        Elf64_Rela e = read_rela(o, r, j);
        uint64_t si = ELF64_R_SYM(e.r_info);
        uint32_t type = ELF64_R_TYPE(e.r_info);
        if (si >= o->nsyms)
          return BAD(o, "relocation %llu: symbol %llu of %llu", (unsigned long long)j,
                     (unsigned long long)si, (unsigned long long)o->nsyms);
        bool got = needs_got(type), stub = false;
        if (is_plt(type) && si) {
          Elf64_Sym s = read_sym(o, si);
          stub = s.st_shndx == SHN_UNDEF && !defined_inside(L, o, &s);
          got |= stub;
        }
        if (got && o->got[si] < 0) o->got[si] = (int64_t)L->got_slots++;
        if (stub && o->stub[si] < 0) o->stub[si] = (int64_t)L->stubs++;
      }
    }
  }
  return NULL;
}

static uint64_t page_up(uint64_t x) {
  return (x + PAGE - 1) & ~(uint64_t)(PAGE - 1);
}

/* The GOT follows the read-only data, stubs follow the code. */
static uint64_t got_offset(const loader_t *L) {
  return (L->seg_size[SEG_RO] + 7) & ~(uint64_t)7;
}
static uint64_t stub_offset(const loader_t *L) {
  return (L->seg_size[SEG_TEXT] + 15) & ~(uint64_t)15;
}

static kiln_status map_image(loader_t *L) {
  uint64_t text = page_up(stub_offset(L) + L->stubs * STUB_BYTES);
  uint64_t ro = page_up(got_offset(L) + L->got_slots * 8);
  uint64_t rw = page_up(L->seg_size[SEG_RW]);
  if (text + ro + rw > MAX_IMAGE_BYTES) /* stubs and PC-relative code reach the whole map */
    return KILN_ERR_UNIMPLEMENTED("more than %llu bytes to map",
                                  (unsigned long long)MAX_IMAGE_BYTES);
  L->map_size = (size_t)(text + ro + rw);
  if (!L->map_size) L->map_size = PAGE;
  void *p = mmap(NULL, L->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    L->map = NULL;
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot map %zu bytes for host code",
                            L->map_size);
  }
  L->map = p;
  L->seg_base[SEG_TEXT] = (uint64_t)(uintptr_t)p;
  L->seg_base[SEG_RO] = L->seg_base[SEG_TEXT] + text;
  L->seg_base[SEG_RW] = L->seg_base[SEG_RO] + ro;
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint32_t i = 1; i < o->nsh; i++)
      if (o->seg[i] >= 0 && o->sh[i].sh_type != SHT_NOBITS && o->sh[i].sh_size)
        memcpy((uint8_t *)(uintptr_t)(L->seg_base[o->seg[i]] + o->offset[i]),
               o->b + o->sh[i].sh_offset, o->sh[i].sh_size);
  }
  return NULL;
}

static uint64_t got_base(const loader_t *L) {
  return L->seg_base[SEG_RO] + got_offset(L);
}

/* Every symbol's address: definitions first (in any object), then undefined ones. */
static kiln_status resolve_symbols(loader_t *L) {
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < L->n; k++) {
      obj_t *o = &L->objs[k];
      for (uint64_t i = 1; i < o->nsyms; i++) {
        Elf64_Sym s = read_sym(o, i);
        bool undef = s.st_shndx == SHN_UNDEF;
        if (undef != (pass == 1)) continue;
        if (!undef) {
          if (s.st_shndx == SHN_ABS) {
            o->sym[i] = (uintptr_t)s.st_value;
          } else if (s.st_shndx == SHN_COMMON) {
            return UNSUPPORTED(o, "common symbol %llu", (unsigned long long)i);
          } else if (s.st_shndx >= SHN_LORESERVE) {
            return UNSUPPORTED(o, "symbol %llu in special section %#x", (unsigned long long)i,
                               s.st_shndx);
          } else if (s.st_shndx >= o->nsh) {
            return BAD(o, "symbol %llu: section %u of %u", (unsigned long long)i, s.st_shndx,
                       o->nsh);
          } else if (o->seg[s.st_shndx] >= 0) {
            if (s.st_value > o->sh[s.st_shndx].sh_size)
              return BAD(o, "symbol %llu: value past its section", (unsigned long long)i);
            o->sym[i] =
                (uintptr_t)(L->seg_base[o->seg[s.st_shndx]] + o->offset[s.st_shndx] + s.st_value);
          } else {
            o->external[i] = 2; /* in a section not loaded (debug info): no address */
          }
          continue;
        }
        const char *name = sym_name(o, &s);
        if (!name)
          return BAD(o, "symbol %llu: name out of the string table", (unsigned long long)i);
        if (!*name) continue;
        if (!strcmp(name, "_GLOBAL_OFFSET_TABLE_")) {
          o->sym[i] = (uintptr_t)got_base(L);
          continue;
        }
        uintptr_t d = (uintptr_t)kiln_hashmap_get(&L->defs, name, strlen(name));
        if (d) {
          o->sym[i] = L->objs[(d - 1) >> 32].sym[(d - 1) & 0xffffffffu];
          continue;
        }
        void *a = L->resolve(L->user, name);
        if (!a && ELF64_ST_BIND(s.st_info) != STB_WEAK)
          return kiln_status_annotate(
              kiln_status_make(KILN_NOT_FOUND, "undefined symbol '%s' not found in the process",
                               name),
              "ELF object %d", o->index);
        o->sym[i] = (uintptr_t)a;
        o->external[i] = 1;
      }
    }
  }
  return NULL;
}

/* Writes the GOT (absolute addresses) and the stubs (jmp *slot(%rip)). */
static void fill_got_and_stubs(loader_t *L) {
  uint64_t g = got_base(L), st = L->seg_base[SEG_TEXT] + stub_offset(L);
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint64_t i = 0; i < o->nsyms; i++) {
      if (o->got[i] >= 0) {
        uint64_t v = o->sym[i];
        memcpy((void *)(uintptr_t)(g + (uint64_t)o->got[i] * 8), &v, 8);
      }
      if (o->stub[i] >= 0) {
        uint8_t *p = (uint8_t *)(uintptr_t)(st + (uint64_t)o->stub[i] * STUB_BYTES);
        int64_t rel = (int64_t)(g + (uint64_t)o->got[i] * 8) - (int64_t)((uintptr_t)p + 6);
        int32_t r32 = (int32_t)rel; /* the whole mapping is under 2 GiB */
        p[0] = 0xff;
        p[1] = 0x25;
        memcpy(p + 2, &r32, 4);
        p[6] = p[7] = 0xcc;
      }
    }
  }
}

static bool fits_s32(int64_t v) {
  return v >= INT32_MIN && v <= INT32_MAX;
}

/* Applies the relocations of every loaded section. */
static kiln_status relocate(loader_t *L) {
  uint64_t G = got_base(L);
  uint64_t stubs = L->seg_base[SEG_TEXT] + stub_offset(L);
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint32_t r = 1; r < o->nsh; r++) {
      if (o->sh[r].sh_type != SHT_RELA) continue;
      uint32_t t = 0;
      KILN_RETURN_IF_ERROR_PLAIN(check_rela(o, r, &t));
      if (!t) continue;
      uint64_t count = o->sh[r].sh_size / sizeof(Elf64_Rela);
      uint64_t sec = L->seg_base[o->seg[t]] + o->offset[t], sec_size = o->sh[t].sh_size;
      bool nobits = o->sh[t].sh_type == SHT_NOBITS;
      for (uint64_t j = 0; j < count; j++) {
        Elf64_Rela e = read_rela(o, r, j);
        uint64_t si = ELF64_R_SYM(e.r_info);
        uint32_t type = ELF64_R_TYPE(e.r_info);
        if (type == R_X86_64_NONE) continue;
        unsigned width = 0;
        switch (type) {
          case R_X86_64_64:
          case R_X86_64_PC64:
          case R_X86_64_GOTOFF64:
          case R_X86_64_GOT64:
          case R_X86_64_GOTPCREL64:
          case R_X86_64_GOTPC64:
          case R_X86_64_PLTOFF64:
            width = 8;
            break;
          case R_X86_64_PC32:
          case R_X86_64_PLT32:
          case R_X86_64_GOTPCREL:
          case R_X86_64_GOTPCRELX:
          case R_X86_64_REX_GOTPCRELX:
          case R_X86_64_32:
          case R_X86_64_32S:
          case R_X86_64_GOTPC32:
            width = 4;
            break;
          default:
            return UNSUPPORTED(o, "relocation type %u", type);
        }
        if (nobits || e.r_offset > sec_size || width > sec_size - e.r_offset)
          return BAD(o, "relocation %llu at %#llx outside its section (%llu bytes)",
                     (unsigned long long)j, (unsigned long long)e.r_offset,
                     (unsigned long long)sec_size);
        if (si >= o->nsyms)
          return BAD(o, "relocation %llu: symbol %llu", (unsigned long long)j,
                     (unsigned long long)si);
        if (o->external[si] == 2)
          return UNSUPPORTED(o, "relocation %llu against a section that is not loaded",
                             (unsigned long long)j);
        uint64_t P = sec + e.r_offset, S = si ? o->sym[si] : 0, A = (uint64_t)e.r_addend;
        uint64_t GOT = o->got[si] >= 0 ? (uint64_t)o->got[si] * 8 : 0;
        uint64_t L_ = o->stub[si] >= 0 ? stubs + (uint64_t)o->stub[si] * STUB_BYTES : S;
        uint64_t v = 0;
        switch (type) {
          case R_X86_64_64:
            v = S + A;
            break;
          case R_X86_64_PC64:
            v = S + A - P;
            break;
          case R_X86_64_GOTOFF64:
            v = S + A - G;
            break;
          case R_X86_64_GOT64:
            v = GOT + A;
            break;
          case R_X86_64_GOTPCREL64:
            v = G + GOT + A - P;
            break;
          case R_X86_64_GOTPC64:
            v = G + A - P;
            break;
          case R_X86_64_PLTOFF64:
            v = L_ + A - G;
            break;
          case R_X86_64_PC32:
            v = S + A - P;
            break;
          case R_X86_64_PLT32:
            v = L_ + A - P;
            break;
          case R_X86_64_GOTPCREL:
          case R_X86_64_GOTPCRELX:
          case R_X86_64_REX_GOTPCRELX:
            v = G + GOT + A - P;
            break;
          case R_X86_64_GOTPC32:
            v = G + A - P;
            break;
          case R_X86_64_32:
          case R_X86_64_32S:
            v = S + A;
            break;
        }
        if (width == 4) {
          bool ok = type == R_X86_64_32 ? v <= UINT32_MAX : fits_s32((int64_t)v);
          if (!ok)
            return UNSUPPORTED(o, "relocation %llu (type %u) does not reach its target",
                               (unsigned long long)j, type);
          uint32_t w = (uint32_t)v;
          memcpy((void *)(uintptr_t)P, &w, 4);
        } else {
          memcpy((void *)(uintptr_t)P, &v, 8);
        }
      }
    }
  }
  return NULL;
}

static kiln_status protect(loader_t *L) {
  uint64_t text = L->seg_base[SEG_RO] - L->seg_base[SEG_TEXT];
  uint64_t ro = L->seg_base[SEG_RW] - L->seg_base[SEG_RO];
  if ((text && mprotect(L->map, text, PROT_READ | PROT_EXEC)) ||
      (ro && mprotect(L->map + text, ro, PROT_READ)))
    return KILN_ERR_INTERNAL("mprotect of loaded host code failed");
  return NULL;
}

/* Registers each object's unwind table with the unwinder, as ORC does (libgcc's
 * __register_frame: the table's start, read up to its zero terminator). */
static kiln_status register_frames(loader_t *L, kiln_host_elf_t *img) {
  int total = 0;
  for (int k = 0; k < L->n; k++) total += L->objs[k].num_eh;
  if (!total) return NULL;
  void (*reg)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "__register_frame");
  img->deregister = (void (*)(void *))dlsym(RTLD_DEFAULT, "__deregister_frame");
  if (!reg || !img->deregister)
    return KILN_ERR_UNIMPLEMENTED("unwind tables, but no __register_frame in the process");
  img->frames = kiln_try_calloc((size_t)total, sizeof(void *));
  if (!img->frames) return OUT_OF_MEMORY("the unwind tables' list");
  for (int k = 0; k < L->n; k++) {
    obj_t *o = &L->objs[k];
    for (uint32_t i = 1; i < o->nsh; i++) {
      if (!o->eh[i] || o->sh[i].sh_size < 4) continue;
      void *p = (void *)(uintptr_t)(L->seg_base[SEG_RO] + o->offset[i]);
      reg(p);
      img->frames[img->num_frames++] = p;
    }
  }
  return NULL;
}

/* The image's symbol table: every global/weak definition's address. */
static kiln_status publish(loader_t *L, kiln_host_elf_t *img) {
  img->addresses = kiln_try_calloc(L->defs.len ? L->defs.len : 1, sizeof(uintptr_t));
  if (!img->addresses) return OUT_OF_MEMORY("the symbol addresses");
  size_t n = 0;
  for (size_t i = 0; i < L->defs.cap; i++) {
    const kiln_hashmap_entry_t *e = &L->defs.slots[i];
    if (!e->key) continue;
    uintptr_t d = (uintptr_t)e->value;
    img->addresses[n] = L->objs[(d - 1) >> 32].sym[(d - 1) & 0xffffffffu];
    if (!kiln_hashmap_try_put(&img->symbols, e->key, e->key_len, &img->addresses[n]))
      return OUT_OF_MEMORY("the symbol table");
    n++;
  }
  return NULL;
}

kiln_status kiln_host_elf_load(const void *const *objects, const size_t *sizes, int n,
                               kiln_host_elf_resolver_t resolve, void *user,
                               kiln_host_elf_t **out) {
  if (out) *out = NULL;
  if (!out || n < 0 || (n && (!objects || !sizes)))
    return KILN_ERR_INVALID("kiln_host_elf_load: NULL argument");
  loader_t L;
  memset(&L, 0, sizeof L);
  L.n = n;
  L.objs = kiln_try_calloc(n ? (size_t)n : 1, sizeof(obj_t));
  if (!L.objs) return OUT_OF_MEMORY("the objects' records");
  L.resolve = resolve ? resolve : kiln_host_elf_process_symbol;
  L.user = user;
  kiln_hashmap_init(&L.defs);
  kiln_status s = NULL;
  for (int k = 0; k < n && !s; k++) {
    L.objs[k].b = objects[k];
    L.objs[k].n = sizes[k];
    L.objs[k].index = k;
    if (!objects[k]) s = KILN_ERR_INVALID("kiln_host_elf_load: object %d is NULL", k);
    if (!s) s = parse(&L.objs[k]);
  }
  if (!s) s = collect_definitions(&L);
  if (!s) s = lay_out(&L);
  if (!s) s = map_image(&L);
  if (!s) s = resolve_symbols(&L);
  if (!s) {
    fill_got_and_stubs(&L);
    s = relocate(&L);
  }
  if (!s) s = protect(&L);
  kiln_host_elf_t *img = NULL;
  if (!s && !(img = kiln_try_calloc(1, sizeof *img))) s = OUT_OF_MEMORY("the image");
  if (!s) {
    kiln_hashmap_init(&img->symbols);
    img->base = L.map;
    img->size = L.map_size;
    s = register_frames(&L, img);
    if (!s) s = publish(&L, img);
    if (s) {
      kiln_host_elf_destroy(img); /* deregisters what register_frames registered */
      img = NULL;
      L.map = NULL; /* unmapped with the image */
    }
  }
  if (s && L.map) munmap(L.map, L.map_size);
  for (int k = 0; k < n; k++) obj_free(&L.objs[k]);
  kiln_free(L.objs);
  kiln_hashmap_free(&L.defs);
  *out = img;
  return s;
}

#endif /* KILN_HOST_ELF_SUPPORTED */
