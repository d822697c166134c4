# keras.ops and the op_*() family: every public function reachable as
# op_*(), from keras3 or from customgrad, with no name defined by both;
# customgrad's wrappers take Python's argument names.

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

customgrad_op_exports <- function() {
  grep("^op_", getNamespaceExports("customgrad"), value = TRUE)
}

test_that("every keras.ops function is an op_*() of keras3 or customgrad", {
  skip_if_no_backend()
  info <- keras_ops_info()
  modules <- vapply(info, `[[`, "", "module")
  expect_gte(sum(modules == "keras.ops"), 337)
  expect_gte(sum(modules == "keras.ops.image"), 16)
  wanted <- vapply(info, function(op) expected_op_name(op$module, op$name), "")
  exported <- c(getNamespaceExports("keras3"), customgrad_op_exports())
  missing <- setdiff(wanted, exported)
  expect(
    length(missing) == 0,
    paste(
      "Public keras.ops functions that neither keras3 nor customgrad exports:",
      paste(missing, collapse = ", ")
    )
  )
})

test_that("customgrad exports no op_*() of keras3 but op_custom_gradient()", {
  both <- intersect(customgrad_op_exports(), getNamespaceExports("keras3"))
  expect_identical(setdiff(both, "op_custom_gradient"), character())
})

test_that("a wrapper steps aside once keras3 exports its name", {
  # Each op_*() wrapper is exported under a NAMESPACE condition on keras3's
  # exports (read when customgrad loads): a later keras3 that adds the op
  # keeps its own, unmasked.
  skip_if_no_backend()
  directives <- parse(system.file("NAMESPACE", package = "customgrad"))
  conditional <- Filter(
    function(e) identical(e[[1]], as.name("if")),
    directives
  )
  exported_if <- vapply(conditional, function(e) as.character(e[[3]][[2]]), "")
  wrapped <- vapply(
    keras_ops_info(),
    function(op) expected_op_name(op$module, op$name),
    ""
  )
  ours <- setdiff(
    intersect(customgrad_op_exports(), wrapped),
    "op_custom_gradient"
  )
  expect_gte(length(ours), 70)
  expect_setequal(intersect(exported_if, ours), ours)
  for (e in conditional) {
    name <- as.character(e[[3]][[2]])
    if (!name %in% ours) {
      next
    }
    # keras3 as installed: exported; a keras3 that has it: not exported.
    expect_true(eval(e[[2]], baseenv()), label = name)
    later_keras3 <- list(
      getNamespaceExports = function(ns) c(getNamespaceExports(ns), name)
    )
    expect_false(
      eval(e[[2]], list2env(later_keras3, parent = baseenv())),
      label = name
    )
  }
})

test_that("customgrad's wrappers take Python's argument names", {
  skip_if_no_backend()
  ns <- asNamespace("customgrad")
  ours <- setdiff(customgrad_op_exports(), getNamespaceExports("keras3"))
  checked <- 0L
  for (op in keras_ops_info()) {
    r_name <- expected_op_name(op$module, op$name)
    if (!r_name %in% ours) {
      next # keras3's, which keras3 tests
    }
    checked <- checked + 1L
    fmls <- names(formals(get(r_name, envir = ns)))
    missing <- setdiff(unlist(op$args), fmls)
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
  expect_gt(checked, 0L)
})
