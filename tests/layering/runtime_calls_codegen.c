/* A planted layer violation at link level: a function that calls into codegen without
 * including its header (so it compiles anywhere). check_links.sh must reject the library
 * built from it when the library stands in for a runtime one (the ctest
 * layering_link_check_catches_a_runtime_call_into_codegen). Not part of any layer. */
struct kiln_affine_ctx;
void *kiln_kir_module_create(const char *name, struct kiln_affine_ctx *ctx);

void *kiln_layering_planted_call(void);
void *kiln_layering_planted_call(void) {
  return kiln_kir_module_create("planted", (struct kiln_affine_ctx *)0);
}
