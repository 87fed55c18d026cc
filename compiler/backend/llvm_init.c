/* One-time LLVM target initialization and helpers shared by the NVPTX and host backends. */
#include "compiler/backend/llvm_init.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"

static pthread_once_t native_once = PTHREAD_ONCE_INIT;
static bool native_ok;
static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void init_native_once(void) {
  /* LLVMInitializeNativeTarget returns 1 when LLVM was built without the host's backend. */
  native_ok = LLVMInitializeNativeTarget() == 0 && LLVMInitializeNativeAsmPrinter() == 0 &&
              LLVMInitializeNativeAsmParser() == 0;
}

static void init_nvptx_once(void) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
}

kiln_status kiln_llvm_init_native(void) {
  kiln_once(&native_once, init_native_once);
  if (!native_ok) {
    char *triple = LLVMGetDefaultTargetTriple();
    kiln_status s = kiln_status_make(
        KILN_UNAVAILABLE, "the linked LLVM has no backend for the host triple %s", triple);
    LLVMDisposeMessage(triple);
    return s;
  }
  return NULL;
}

kiln_status kiln_llvm_init_nvptx(void) {
  kiln_once(&nvptx_once, init_nvptx_once);
  return NULL;
}

kiln_status kiln_llvm_error_to_status(LLVMErrorRef err, kiln_status_code_t code, const char *what) {
  if (!err) return NULL;
  char *msg = LLVMGetErrorMessage(err); /* consumes err */
  kiln_status s = kiln_status_make(code, "%s: %s", what, msg ? msg : "(no message)");
  LLVMDisposeErrorMessage(msg);
  return s;
}

kiln_status kiln_backend_emit_assembly(LLVMTargetMachineRef tm, LLVMModuleRef m, bool clone_first,
                                       char **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  LLVMModuleRef target = clone_first ? LLVMCloneModule(m) : m;
  char *err = NULL;
  LLVMMemoryBufferRef buf = NULL;
  LLVMBool failed = LLVMTargetMachineEmitToMemoryBuffer(tm, target, LLVMAssemblyFile, &err, &buf);
  if (clone_first) LLVMDisposeModule(target);
  if (failed) {
    kiln_status s = kiln_status_make(KILN_INTERNAL, "LLVM code generation failed: %s",
                                     err ? err : "(no message)");
    LLVMDisposeMessage(err);
    return s;
  }
  if (err) LLVMDisposeMessage(err);
  size_t n = LLVMGetBufferSize(buf);
  const char *start = LLVMGetBufferStart(buf);
  /* The buffer may or may not carry a trailing NUL; keep the text without it. */
  while (n > 0 && start[n - 1] == '\0') n--;
  char *text = kiln_try_malloc(n + 1);
  if (!text) {
    LLVMDisposeMemoryBuffer(buf);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory for %zu bytes of assembly", n);
  }
  memcpy(text, start, n);
  text[n] = '\0';
  LLVMDisposeMemoryBuffer(buf);
  *out = text;
  *out_len = n;
  return NULL;
}

const char *kiln_backend_dump_dir(const char *explicit_dir) {
  return explicit_dir && explicit_dir[0] ? explicit_dir : NULL;
}

/* mkdir -p: creates every missing component of `path`. */
static kiln_status make_dirs(const char *path) {
  char *p = kiln_strdup(path);
  kiln_status s = NULL;
  for (char *c = p + 1;; c++) {
    if (*c == '/' || *c == '\0') {
      char saved = *c;
      *c = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        s = kiln_status_make(KILN_UNAVAILABLE, "cannot create dump directory %s: %s", p,
                             strerror(errno));
        *c = saved;
        break;
      }
      *c = saved;
      if (saved == '\0') break;
    }
  }
  kiln_free(p);
  return s;
}

kiln_status kiln_backend_dump_text(const char *dir, const char *name, const char *stage,
                                   const char *ext, const char *text, size_t len) {
  if (!dir || !dir[0] || !name || !stage || !ext)
    return KILN_ERR_INVALID("dump: NULL or empty argument");
  KILN_RETURN_IF_ERROR(make_dirs(dir), "while dumping %s", stage);
  kiln_strbuf_t path = {0};
  kiln_strbuf_printf(&path, "%s/", dir);
  for (const char *c = name; *c; c++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '.' || *c == '-';
    kiln_strbuf_append_char(&path, ok ? *c : '_');
  }
  kiln_strbuf_printf(&path, ".%s.%s", stage, ext);
  kiln_status s = NULL;
  FILE *f = fopen(kiln_strbuf_cstr(&path), "wb");
  if (!f) {
    s = kiln_status_make(KILN_UNAVAILABLE, "cannot open dump file %s: %s", kiln_strbuf_cstr(&path),
                         strerror(errno));
  } else {
    if (len && fwrite(text, 1, len, f) != len)
      s = kiln_status_make(KILN_DATA_LOSS, "short write to dump file %s", kiln_strbuf_cstr(&path));
    if (fclose(f) != 0 && !s)
      s = kiln_status_make(KILN_DATA_LOSS, "cannot close dump file %s", kiln_strbuf_cstr(&path));
  }
  kiln_strbuf_free(&path);
  return s;
}

kiln_status kiln_backend_dump_module(const char *dir, const char *name, const char *stage,
                                     LLVMModuleRef m) {
  char *ir = LLVMPrintModuleToString(m);
  kiln_status s = kiln_backend_dump_text(dir, name, stage, "ll", ir, strlen(ir));
  LLVMDisposeMessage(ir);
  return s;
}
