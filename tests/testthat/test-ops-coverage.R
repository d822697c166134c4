# keras.ops and the op_*() family: full coverage, Python's argument names.

keras_ops_info <- function() {
  op_exp(0) # starts Keras with the chosen backend
  reticulate::py_run_string(
    "
import inspect as _cg_inspect
import keras as _cg_keras

def _cg_ops_info():
    out = []
    for path, module in (('keras.ops', _cg_keras.ops), ('keras.ops.image', _cg_keras.ops.image)):
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith('_') or _cg_inspect.ismodule(fn) or not callable(fn):
                continue
            params = _cg_inspect.signature(fn).parameters.values()
            plain = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
            out.append({'module': path, 'name': name, 'args': plain, 'var': var})
    return out
"
  )
  reticulate::import_main(convert = TRUE)$`_cg_ops_info`()
}

test_that("every public function of keras.ops and keras.ops.image has an op_*() wrapper", {
  skip_if_no_backend()
  info <- keras_ops_info()
  modules <- vapply(info, `[[`, "", "module")
  expect_gte(sum(modules == "keras.ops"), 337)
  expect_gte(sum(modules == "keras.ops.image"), 16)
  wanted <- vapply(info, function(op) expected_op_name(op$module, op$name), "")
  missing <- wanted[!wanted %in% getNamespaceExports("customgrad")]
  expect(
    length(missing) == 0,
    paste(
      "Public keras.ops functions without an op_*() wrapper:",
      paste(missing, collapse = ", ")
    )
  )
})

test_that("wrappers take Python's argument names", {
  skip_if_no_backend()
  # R conventions that rename arguments on purpose, as keras3 does.
  renamed <- list(
    op_arange = c(stop = "end"),
    op_vectorized_map = c("function" = "f")
  )
  ns <- asNamespace("customgrad")
  for (op in keras_ops_info()) {
    r_name <- expected_op_name(op$module, op$name)
    fmls <- names(formals(get(r_name, envir = ns)))
    args <- unlist(op$args)
    if (!is.null(renamed[[r_name]])) {
      hit <- args %in% names(renamed[[r_name]])
      args[hit] <- renamed[[r_name]][args[hit]]
    }
    missing <- setdiff(args, fmls)
    expect(
      length(missing) == 0,
      sprintf(
        "%s() lacks Python's argument(s) %s",
        r_name,
        paste(missing, collapse = ", ")
      )
    )
    if (op$var) expect_true("..." %in% fmls, info = r_name)
  }
})
