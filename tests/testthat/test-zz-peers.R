# (Named to run last but one: on TensorFlow some of these cases leave a
# graph the default in the session, a known defect, which would fail the
# files after them.)
#
# The peers' own custom-gradient cases, written with customgrad: Keras
# (keras/src/ops/core_test.py, keras/src/quantizers/quantizers_test.py),
# TensorFlow (CustomGradientTest in tensorflow/python/ops/gradients_test.py;
# FakeQuantWithMinMaxVarsGradientTest in tensorflow/compiler/tests/
# fake_quant_ops_test.py for the bounds' gradients) and JAX (CustomVJPTest
# in tests/custom_api_test.py). Each test names the case it comes from and
# asserts the numbers that case asserts, or the analytic values of its
# definitions where it asserts none ("doesn't crash"). The same R code runs
# on every backend; where customgrad refuses a case on one backend (a
# gradient through op_vectorized_map() on TensorFlow, whose pfor drops
# custom gradients) the test says so and expects the classed error.
#
# Peer cases left out, with the reason:
# - keras and TF: none of Keras'. TF CustomGradientTest:
#   testCustomGradientClass (a decorated Python method bound to `self`; R
#   has no bound methods, and the function itself is testCustomGradient),
#   testCustomGradientWithVariables, testCustomGradientWithVariablesNoFalse
#   Positives, testRecursiveCustomGradient (TF1 graphs: variable_scope,
#   core_layers.dense and gradients.gradients inside the rule; the eager
#   form is testCustomGradientWithVariablesEager),
#   testCustomGradientErrorsWithNonResourceVariables and
#   testRVGradientsDynamicCond (TF1 sessions, placeholders; the latter has
#   no custom gradient), testCustomGradientRaggedTensor and
#   testCustomGradientMultipleRaggedTensors as such (Keras has no ragged
#   tensors: written below with dense tensors of the same values),
#   testCustomGradientQuantizedDtypeTraining (qint8: no quantized dtypes in
#   Keras), testCustomGradientStructuralInputOutput (structures of None and
#   empty tuples: pytrees of non-tensors).
# - JAX CustomVJPTest: test_deepcopy (copy.deepcopy of a Python object),
#   test_jvp_error (forward mode), test_nondiff_arg_tracer_error and
#   test_nondiff_arg_nested_tracer_error (nondiff_argnums holding tracers:
#   a JAX API with no customgrad meaning), test_vmap_axes and test_pmap
#   (empty in JAX), test_fwd_rule_primal_out_type_doesnt_match_primal_error_
#   message (a separate fwd rule: customgrad's f is both), test_issue2511
#   and test_lowering_out_of_traces (no custom gradient; a namedtuple
#   pytree), test_initial_style_vmap_with_collective (psum with a named
#   axis), test_float0_initial_style and
#   test_float0_cotangents_automatically_handled (JAX's float0 dtype in a
#   scan carry and a jitted vjp; integer inputs are test_float0 and
#   test_float0_bwd_none), test_remat, test_remat_pytree_arg,
#   test_remat_nondiff_argnums, test_remat_higher_order (jax.remat: no
#   checkpointing in Keras), test_symbolic_zeros_nondiff_argnums and every
#   test_symbolic_zero*/test_run_rules_more_than_once (symbolic_zeros=True),
#   test_custom_vjp_closure_4521 (a function returning None),
#   test_custom_gradient_with_logs(_bad_return_errors) and
#   test_defvjp_with_logs* (with_logs), test_closure_convert,
#   test_closure_convert_mixed_consts, test_closure_convert_pytree_mismatch
#   (jax.closure_convert: in R closed-over values are arguments already),
#   test_pytrees_not_required_to_contain_nones (a registered pytree class),
#   test_bwd_rule_shape_mismatch_disable (a JAX config flag),
#   test_optimize_remat* (JAX internals), test_resolve_kwargs_error_message
#   (Python keyword-only binding; R reports a missing argument itself),
#   test_pretty_print and test_custom_lin_pretty_print (jaxpr text), and
#   CustomVJP3Test (the same tests under another JAX config).

test_that("keras core_test.test_custom_gradient (use_variable=False)", {
  skip_if_no_backend()
  log1pexp <- new_log1pexp()
  x <- op_convert_to_tensor(100, "float32")
  expect_tensor(op_grad(log1pexp)(x), 1)
  expect_equal(as.vector(native_grad(log1pexp, 100)), 1)
  # The naive formula's gradient is NaN in float32: exp(100) overflows.
  naive <- function(x) op_log(1 + op_exp(x))
  expect_true(is.nan(as.vector(native_grad(naive, 100))))
})

test_that("keras core_test.test_custom_gradient (use_variable=True)", {
  skip_if_no_backend()
  log1pexp <- new_log1pexp()
  v <- keras3::keras$Variable(5, trainable = FALSE)
  # The layer's call: log1pexp of the variable, plus the input.
  call <- function(x) op_add(log1pexp(v), x)
  x <- op_convert_to_tensor(100, "float32")
  expect_tensor(call(x), 100 + log1p(exp(5)), tolerance = 1e-6)
  expect_tensor(op_grad(call)(x), 1)
  expect_equal(as.vector(native_grad(call, 100)), 1)
})

test_that("keras quantizers_test.test_fake_quant_with_min_max_vars (and tf FakeQuantWithMinMaxVarsGradientTest)", {
  skip_if_no_backend()
  # Fake quantisation with tensor bounds, TensorFlow's straight-through
  # rule: the input's gradient passes inside [nudged min, nudged max], the
  # bounds get what falls below or above them.
  fake_quant <- op_custom_gradient(
    function(x, min_val, max_val, num_bits = 8L, narrow_range = FALSE) {
      quant_min <- if (narrow_range) 1 else 0
      quant_max <- 2^num_bits - 1
      scale <- (max_val - min_val) / (quant_max - quant_min)
      zero_point <- op_round(
        op_clip(quant_min - min_val / scale, quant_min, quant_max)
      )
      nudged_min <- (quant_min - zero_point) * scale
      nudged_max <- (quant_max - zero_point) * scale
      # Computed in the bounds' dtype, as Keras does.
      x_wide <- op_cast(x, op_dtype(nudged_min))
      clamped <- op_clip(x_wide, nudged_min, nudged_max)
      value <- op_floor((clamped - nudged_min) / scale + 0.5) *
        scale +
        nudged_min
      grad <- function(upstream) {
        inside <- op_logical_and(
          op_greater_equal(x_wide, nudged_min),
          op_less_equal(x_wide, nudged_max)
        )
        below <- op_where(op_less(x_wide, nudged_min), upstream, 0)
        above <- op_where(op_greater(x_wide, nudged_max), upstream, 0)
        bound_grad <- function(m, like) {
          if (length(op_shape(like)) == 1L && op_shape(like)[[1]] > 1L) {
            op_sum(m, axis = 1L)
          } else {
            op_reshape(op_sum(m), op_shape(like))
          }
        }
        list(
          op_where(inside, upstream, 0),
          bound_grad(below, min_val),
          bound_grad(above, max_val)
        )
      }
      tuple(op_cast(value, op_dtype(x)), grad)
    }
  )
  # The peer's cases: bounds, bits, range, and the nudged bounds and step
  # they must give.
  cases <- list(
    list(0, 255, 8L, FALSE, 0, 255, 1),
    list(0, 255, 8L, FALSE, 0, 255, 1, scalar = TRUE),
    list(0.5, 128, 8L, FALSE, 0, 127.5, 0.5),
    list(-128, -0.5, 8L, FALSE, -127.5, 0, 0.5),
    list(-0.1, 127.4, 8L, FALSE, 0, 127.5, 0.5),
    list(0, 254, 8L, TRUE, 0, 254, 1),
    list(0.1, 127.1, 8L, TRUE, 0, 127, 0.5),
    list(-127.1, -0.1, 8L, TRUE, -127, 0, 0.5),
    list(-0.1, 126.9, 8L, TRUE, 0, 127, 0.5),
    list(0, 127, 7L, FALSE, 0, 127, 1),
    list(0.5, 64, 7L, FALSE, 0, 63.5, 0.5),
    list(-64, -0.5, 7L, FALSE, -63.5, 0, 0.5),
    list(-0.1, 63.4, 7L, FALSE, 0, 63.5, 0.5),
    list(0, 126, 7L, TRUE, 0, 126, 1),
    list(0.1, 63.1, 7L, TRUE, 0, 63, 0.5),
    list(-63.1, -0.1, 7L, TRUE, -63, 0, 0.5),
    list(-0.1, 62.9, 7L, TRUE, 0, 63, 0.5),
    # per channel (the peer's axis 1: the columns here)
    list(
      c(0, 0.5, -128, -0.1),
      c(255, 128, -0.5, 127.4),
      8L,
      FALSE,
      c(0, 0, -127.5, 0),
      c(255, 127.5, 0, 127.5),
      c(1, 0.5, 0.5, 0.5)
    ),
    list(
      c(0, 0.1, -127.1, -0.1),
      c(254, 127.1, -0.1, 126.9),
      8L,
      TRUE,
      c(0, 0, -127, 0),
      c(254, 127, 0, 127),
      c(1, 0.5, 0.5, 0.5)
    ),
    list(
      c(0, 0.5, -64, -0.1),
      c(127, 64, -0.5, 63.4),
      7L,
      FALSE,
      c(0, 0, -63.5, 0),
      c(127, 63.5, 0, 63.5),
      c(1, 0.5, 0.5, 0.5)
    ),
    list(
      c(0, 0.1, -63.1, -0.1),
      c(126, 63.1, -0.1, 62.9),
      7L,
      TRUE,
      c(0, 0, -63, 0),
      c(126, 63, 0, 63),
      c(1, 0.5, 0.5, 0.5)
    )
  )
  for (case in cases) {
    nmin <- case[[5]]
    nmax <- case[[6]]
    step <- case[[7]]
    # One column per channel: the peer's 11 inputs around the bounds.
    inputs <- rbind(
      nmin - step,
      nmin - 0.01,
      nmin,
      nmin + 0.01,
      nmin + step - 0.01,
      nmin + step,
      nmin + step + 0.01,
      nmax - 0.01,
      nmax,
      nmax + 0.01,
      nmax + step
    )
    expected <- rbind(
      nmin,
      nmin,
      nmin,
      nmin,
      nmin + step,
      nmin + step,
      nmin + step,
      nmax,
      nmax,
      nmax,
      nmax
    )
    channels <- ncol(inputs)
    # Upstream gradients 1..11 in every channel.
    up <- matrix(seq_len(11), 11, channels)
    dx <- matrix(c(0, 0, 3, 4, 5, 6, 7, 8, 9, 0, 0), 11, channels)
    # Per-tensor bounds of shape (1) or (), per-channel ones of shape (4).
    as_bounds <- function(v) if (isTRUE(case$scalar)) v else array(v, length(v))
    lo_r <- as_bounds(case[[1]])
    hi_r <- as_bounds(case[[2]])
    lo <- op_convert_to_tensor(lo_r, "float32")
    hi <- op_convert_to_tensor(hi_r, "float32")
    num_bits <- case[[3]]
    narrow <- case[[4]]
    x <- op_convert_to_tensor(inputs, "float32")
    u <- op_convert_to_tensor(up, "float32")
    label <- sprintf("bounds %s..%s", case[[1]][1], case[[2]][1])
    expect_equal(
      as.array(fake_quant(x, lo, hi, num_bits, narrow)),
      expected,
      tolerance = 1e-5,
      ignore_attr = TRUE,
      label = label
    )
    loss <- function(x, lo, hi, u) {
      op_sum(fake_quant(x, lo, hi, num_bits, narrow) * u)
    }
    # The peer's TensorFlow route compiles the gradient.
    grads <- op_compile(op_grad(loss, wrt = 1:3))(x, lo, hi, u)
    expect_equal(as.array(grads[[1]]), dx, ignore_attr = TRUE, label = label)
    # TensorFlow's gradient test: below the range 1 + 2, above 10 + 11.
    expect_equal(as.vector(as.array(grads[[2]])), rep(3, channels))
    expect_equal(as.vector(as.array(grads[[3]])), rep(21, channels))
    # The backend's own autodiff.
    native <- native_grads(
      function(x, lo, hi) {
        op_sum(fake_quant(x, lo, hi, num_bits, narrow) * u)
      },
      inputs,
      lo_r,
      hi_r
    )
    expect_equal(as.array(native[[1]]), dx, ignore_attr = TRUE, label = label)
    expect_equal(as.vector(native[[2]]), rep(3, channels))
    expect_equal(as.vector(native[[3]]), rep(21, channels))
    # float16 and bfloat16 inputs keep their dtype and the values.
    for (dtype in c("float16", "bfloat16")) {
      out <- fake_quant(op_cast(x, dtype), lo, hi, num_bits, narrow)
      expect_identical(op_dtype(out), dtype)
      expect_equal(
        as.array(op_cast(out, "float32")),
        expected,
        tolerance = 1e-2,
        ignore_attr = TRUE,
        label = label
      )
    }
  }
})

test_that("tf CustomGradientTest.testCustomGradientTrivial", {
  skip_if_no_backend()
  my_identity <- op_custom_gradient(function(x) {
    tuple(x, function(dy) list(3 * dy))
  })
  twice <- function(x) my_identity(my_identity(x))
  x <- op_convert_to_tensor(3, "float32")
  expect_tensor(twice(x), 3)
  expect_tensor(op_grad(twice)(x), 9)
  expect_tensor(op_compile(op_grad(twice))(x), 9)
  expect_equal(as.vector(native_grad(twice, 3)), 9)
})

test_that("tf CustomGradientTest.testCustomGradient", {
  skip_if_no_backend()
  # The rule swaps the two gradients on purpose.
  my_multiply <- op_custom_gradient(function(x1, x2) {
    tuple(x1 * x2, function(dy) list(dy * x1, dy * x2))
  })
  x1 <- op_convert_to_tensor(3, "float32")
  x2 <- op_convert_to_tensor(5, "float32")
  expect_tensor(my_multiply(x1, x2), 15)
  grads <- op_grad(my_multiply, wrt = 1:2)(x1, x2)
  expect_tensor(grads[[1]], 3)
  expect_tensor(grads[[2]], 5)
  native <- native_grads(my_multiply, 3, 5)
  expect_equal(c(as.vector(native[[1]]), as.vector(native[[2]])), c(3, 5))
})

test_that("tf CustomGradientTest.testCustomGradientErrors", {
  skip_if_no_backend()
  failing <- function(trace) {
    op_custom_gradient(
      function(x) {
        tuple(x, function(dy) rlang::abort("x", class = "peer_grad_error"))
      },
      trace = trace
    )
  }
  x <- op_convert_to_tensor(1, "float32")
  # Traced, grad is traced with f, at the first call; untraced, the
  # forward pass runs and the gradient raises, as in the peer.
  expect_error(op_grad(failing(TRUE))(x), class = "peer_grad_error")
  untraced <- failing(FALSE)
  expect_tensor(untraced(x), 1)
  expect_error(op_grad(untraced)(x), class = "peer_grad_error")
})

test_that("tf CustomGradientTest.testCustomGradientWithVariablesEager", {
  skip_if_no_backend()
  layer <- layer_dense(units = 4, use_bias = FALSE)
  x <- op_ones(c(3, 2)) + 2
  layer(x) # built outside f
  f <- op_custom_gradient(
    function(x) {
      grad <- function(out_grad, variables = NULL) {
        dx <- op_ones(c(3, 2))
        # TensorFlow hands f's variables to the rule; the other backends
        # have no such convention, and the rule gives the input's only.
        if (is.null(variables)) dx else list(dx, list(op_ones(c(2, 4))))
      }
      tuple(layer(x), grad)
    },
    trace = FALSE
  )
  dx <- op_grad(function(x) op_sum(f(x)))(x)
  expect_equal(sum(as.array(dx)), 6)
  if (config_backend() == "tensorflow") {
    tf <- reticulate::import("tensorflow", convert = FALSE)
    xt <- tf$ones(c(3L, 2L)) + 2
    tape <- tf$GradientTape()
    y <- local({
      local_tape(tape)
      tape$watch(xt)
      f(xt)
    })
    grads <- reticulate::py_to_r(tape$gradient(y, list(xt, layer$kernel)))
    expect_equal(sum(as.array(grads[[1]])), 6)
    expect_equal(sum(as.array(grads[[2]])), 8)
  }
})

test_that("tf CustomGradientTest.testCustomGradientVariablesKwonlyArgs", {
  skip_if_no_backend()
  x_captured <- keras3::keras$Variable(3)
  rule <- function(x, dy, variables) {
    dx <- 4 * op_multiply(dy, x_captured)
    # TensorFlow's convention only: the captured variable's gradient.
    if (is.null(variables)) dx else list(dx, list(5 * x * dy))
  }
  # The peer's two spellings of the rule: the upstream by position, and
  # the upstream among `...` with `variables` named.
  rules <- list(
    function(x) function(dy, variables = NULL) rule(x, dy, variables),
    function(x) {
      function(..., upstream = NULL, variables = NULL) {
        rule(x, upstream %||% ..1, variables)
      }
    }
  )
  for (make_rule in rules) {
    func_mult <- op_custom_gradient(
      function(x) tuple(op_multiply(x, x_captured), make_rule(x)),
      trace = FALSE
    )
    x <- op_convert_to_tensor(6, "float32")
    expect_tensor(func_mult(x), 18)
    expect_tensor(op_grad(func_mult)(x), 4 * 3)
    if (config_backend() == "tensorflow") {
      tf <- reticulate::import("tensorflow", convert = FALSE)
      xv <- tf$Variable(6, dtype = "float32")
      tape <- tf$GradientTape(persistent = TRUE)
      y <- local({
        local_tape(tape)
        func_mult(xv)
      })
      expect_equal(as.vector(as.array(tape$gradient(y, xv))), 4 * 3)
      # The rule's value for the captured variable: 5 x dy.
      expect_equal(as.vector(as.array(tape$gradient(y, x_captured))), 30)
    }
  }
})

test_that("tf CustomGradientTest.testCustomGradientWithCapture", {
  skip_if_no_backend()
  my_multiply <- op_custom_gradient(function(x1, x2) {
    tuple(x1 * x2, function(dy) list(dy * x1, dy * x2))
  })
  # x is captured by the compiled function (the peer's Defun), not passed.
  x <- op_convert_to_tensor(3, "float32")
  compiled <- op_compile(function(y) {
    op_grad(function(y) my_multiply(x, y))(y)
  })
  # The swapped rule gives y's gradient as y itself.
  expect_tensor(compiled(op_convert_to_tensor(5, "float32")), 5)
})

test_that("tf CustomGradientTest.testCustomGradientRaggedTensor (dense values)", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(x * x, function(...) 3 * ..1)
  })
  x <- op_convert_to_tensor(c(1, 2, 3), "float32")
  for (run in list(identity, op_compile)) {
    expect_tensor(run(f)(x), c(1, 4, 9))
    expect_tensor(run(op_grad(function(x) op_sum(f(x))))(x), c(3, 3, 3))
  }
})

test_that("tf CustomGradientTest.testCustomGradientMultipleRaggedTensors (dense values)", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x, y) {
    tuple(list(x * x, 2 * y), function(grad) list(3 * grad[[1]], 4 * grad[[2]]))
  })
  x <- op_convert_to_tensor(c(1, 2, 3), "float32")
  y <- op_convert_to_tensor(c(4, 5, 6), "float32")
  loss <- function(x, y) {
    out <- f(x, y)
    op_sum(out[[1]]) + op_sum(out[[2]])
  }
  for (run in list(identity, op_compile)) {
    out <- run(f)(x, y)
    expect_tensor(out[[1]], c(1, 4, 9))
    expect_tensor(out[[2]], c(8, 10, 12))
    grads <- run(op_grad(loss, wrt = 1:2))(x, y)
    expect_tensor(grads[[1]], c(3, 3, 3))
    expect_tensor(grads[[2]], c(4, 4, 4))
  }
  native <- native_grads(loss, c(1, 2, 3), c(4, 5, 6))
  expect_values(native[[1]], c(3, 3, 3))
  expect_values(native[[2]], c(4, 4, 4))
})

test_that("tf CustomGradientTest.testWithNumpyInputs", {
  skip_if_no_backend()
  # R's arrays are the peer's NumPy inputs.
  f <- op_custom_gradient(function(x) tuple(x, function(dy) NULL))
  m <- matrix(1, 3, 2)
  expect_equal(as.array(f(m)), m)
})

test_that("jax CustomVJPTest.test_basic", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    cos_x <- cos(x)
    tuple(sin(x), function(g) 2 * cos_x * g)
  })
  x <- op_convert_to_tensor(3, "float32")
  expect_tensor(f(x), sin(3))
  expect_tensor(op_grad(f)(x), 2 * cos(3), tolerance = 1e-5)
  vg <- op_value_and_grad(f)(x)
  expect_tensor(vg$value, sin(3))
  expect_tensor(vg$grad, 2 * cos(3), tolerance = 1e-5)
  expect_equal(as.vector(native_grad(f, 3)), 2 * cos(3), tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_invariance", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(cos(2 * x) / 2, function(g) g * 3)
  })
  f2 <- function(x) op_value_and_grad(f)(x)$value
  f3 <- function(x) op_value_and_grad(f2)(x)$value
  x <- op_convert_to_tensor(1, "float32")
  for (fn in list(f, f2, f3)) {
    expect_tensor(fn(x), cos(2) / 2, tolerance = 1e-5)
    expect_tensor(op_grad(fn)(x), 3)
  }
})

test_that("jax CustomVJPTest.test_python_control_flow", {
  skip_if_no_backend()
  # R's `if` on the input's value: f can't be traced, R runs it.
  f <- op_custom_gradient(
    value_like = "x",
    trace = FALSE,
    function(x) {
      positive <- as.numeric(as.array(x)) > 0
      value <- if (positive) sin(x) else cos(x)
      tuple(value, function(g) if (positive) 2 * g else 3 * g)
    }
  )
  for (x0 in c(2, -2)) {
    x <- op_convert_to_tensor(x0, "float32")
    value <- if (x0 > 0) sin(x0) else cos(x0)
    expect_tensor(f(x), value, tolerance = 1e-5)
    vg <- op_value_and_grad(f)(x)
    expect_tensor(vg$value, value, tolerance = 1e-5)
    expect_tensor(vg$grad, if (x0 > 0) 2 else 3)
  }
})

test_that("jax CustomVJPTest.test_python_control_flow_bwd", {
  skip_if_no_backend()
  # The value has no R control flow; the rule branches in R.
  f <- op_custom_gradient(
    value_like = "x",
    trace = FALSE,
    function(x) {
      value <- op_where(x > 0, sin(x), cos(x))
      grad <- function(g) {
        if (as.numeric(as.array(x)) > 0) 2 * g else 3 * g
      }
      tuple(value, grad)
    }
  )
  for (x0 in c(2, -2)) {
    x <- op_convert_to_tensor(x0, "float32")
    value <- if (x0 > 0) sin(x0) else cos(x0)
    expect_tensor(f(x), value, tolerance = 1e-5)
    vg <- op_value_and_grad(f)(x)
    expect_tensor(vg$value, value, tolerance = 1e-5)
    expect_tensor(vg$grad, if (x0 > 0) 2 else 3)
  }
})

test_that("jax CustomVJPTest.test_vmap", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    expect_length(op_shape(x), 0L) # mapped to scalars
    tuple(sin(x), function(g) 2 * cos(x) * g)
  })
  xs <- c(0, 1, 2)
  xxs <- matrix(0:5, 2, 3, byrow = TRUE)
  x <- op_convert_to_tensor(xs, "float32")
  xx <- op_convert_to_tensor(xxs, "float32")
  vmap <- function(fn) function(e) op_vectorized_map(e, fn)
  # Values under vmap: right on every backend.
  expect_tensor(vmap(f)(x), sin(xs), tolerance = 1e-5)
  expect_tensor(vmap(vmap(f))(xx), sin(xxs), tolerance = 1e-5)
  # Gradients under vmap: TensorFlow's pfor would drop the rule, so
  # customgrad refuses them there.
  expect_mapped <- function(run, expected) {
    if (config_backend() == "tensorflow") {
      expect_error(run(), class = "customgrad_error")
    } else {
      expect_equal(
        as.array(run()),
        expected,
        tolerance = 1e-5,
        ignore_attr = TRUE
      )
    }
  }
  expect_mapped(\() vmap(op_grad(f))(x), 2 * cos(xs))
  expect_mapped(
    \() vmap(function(e) op_stack(unname(op_value_and_grad(f)(e))))(x),
    cbind(sin(xs), 2 * cos(xs))
  )
  expect_mapped(\() vmap(vmap(op_grad(f)))(xx), 2 * cos(xxs))
  expect_mapped(
    \() op_grad(function(x) op_sum(vmap(f)(x)))(x),
    2 * cos(xs)
  )
  expect_mapped(
    \() op_grad(function(x) op_sum(vmap(vmap(f))(x)))(xx),
    2 * cos(xxs)
  )
  expect_mapped(
    \() vmap(op_grad(function(x) op_sum(vmap(f)(x))))(xx),
    2 * cos(xxs)
  )
})

test_that("jax CustomVJPTest.test_jit", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(sin(x), function(g) 2 * cos(x) * g)
  })
  x <- op_convert_to_tensor(3, "float32")
  expect_tensor(op_compile(f)(x), sin(3), tolerance = 1e-6)
  expect_tensor(op_compile(op_compile(f))(x), sin(3), tolerance = 1e-6)
  expect_tensor(op_compile(op_grad(f))(x), 2 * cos(3), tolerance = 1e-5)
  expect_tensor(op_grad(op_compile(f))(x), 2 * cos(3), tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_pytrees", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    grad <- function(g) list(list(a = 2 * cos(x$a) * g$b))
    tuple(list(b = sin(x$a)), grad)
  })
  x <- list(a = op_convert_to_tensor(3, "float32"))
  expect_tensor(f(x)$b, sin(3))
  g <- op_grad(function(x) f(x)$b)(x)
  expect_named(g, "a")
  expect_tensor(g$a, 2 * cos(3), tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_kwargs", {
  skip_if_no_backend()
  my_fun <- op_custom_gradient(function(x, y, c = 1) {
    tuple(c * (x + y), function(g) list(g, g, g))
  })
  f <- function(x, y) {
    op_sum(op_square(my_fun(x, y, c = op_convert_to_tensor(2, "float32"))))
  }
  x <- op_convert_to_tensor(10, "float32")
  y <- op_convert_to_tensor(5, "float32")
  # The peer asserts no numbers; these are its definitions' values:
  # (2 (10 + 5))^2, and the rule passes d/d out = 2 * 30 to x and y.
  expect_tensor(f(x, y), 900)
  grads <- op_grad(f, wrt = 1:2)(x, y)
  expect_tensor(grads[[1]], 60)
  expect_tensor(grads[[2]], 60)
})

test_that("jax CustomVJPTest.test_initial_style", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(sin(x), function(g) 2 * cos(x) * g)
  })
  # f inside a scan of length 1.
  foo <- function(x) {
    op_scan(function(carry, z) list(f(carry), NULL), x, length = 1L)[[1]]
  }
  x <- op_convert_to_tensor(3, "float32")
  expect_tensor(op_grad(foo)(x), 2 * cos(3), tolerance = 1e-5)
  # The rule's own derivative at second order.
  expect_tensor(op_grad(op_grad(foo))(x), -2 * sin(3), tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_initial_style_vmap", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(3 * x, function(g) 2 * cos(x) * g)
  })
  foo <- function(x) {
    op_scan(function(carry, z) list(f(carry), NULL), x, length = 1L)[[1]]
  }
  xs <- c(0, 1, 2)
  x <- op_convert_to_tensor(xs, "float32")
  expect_tensor(op_vectorized_map(x, foo), 3 * xs, tolerance = 1e-6)
  grad <- function() op_grad(function(x) op_sum(op_vectorized_map(x, foo)))(x)
  if (config_backend() == "tensorflow") {
    expect_error(grad(), class = "customgrad_error")
  } else {
    expect_tensor(grad(), 2 * cos(xs), tolerance = 1e-5)
  }
})

test_that("jax CustomVJPTest.test_nondiff_argnums", {
  skip_if_no_backend()
  # A function argument is an option: no gradient, reaches f as it is.
  app <- op_custom_gradient(function(f, x) {
    tuple(f(x), function(g) cos(x) * g)
  })
  one <- op_convert_to_tensor(1, "float32")
  expect_tensor(app(function(x) 2 * x, one), 2)
  vg <- op_value_and_grad(function(x) app(function(y) 2 * y, x))(one)
  expect_tensor(vg$value, 2)
  expect_tensor(vg$grad, cos(1), tolerance = 1e-6)
})

test_that("jax CustomVJPTest.test_nondiff_argnames", {
  skip_if_no_backend()
  app <- op_custom_gradient(function(f, x) {
    tuple(f(x), function(g) cos(x) * g)
  })
  one <- op_convert_to_tensor(1, "float32")
  expect_tensor(app(f = function(x) 2 * x, x = one), 2)
  vg <- op_value_and_grad(function(x) app(f = function(y) 2 * y, x = x))(one)
  expect_tensor(vg$value, 2)
  expect_tensor(vg$grad, cos(1), tolerance = 1e-6)
})

test_that("jax CustomVJPTest.test_nondiff_argnums_unhashable", {
  skip_if_no_backend()
  # An R list is a nested input; the rule gives it no gradient.
  f <- op_custom_gradient(function(lst, x) {
    tuple(lst[[1]] * sin(x), function(g) list(NULL, lst[[1]] * cos(x) * g))
  })
  lst <- list(op_convert_to_tensor(2, "float32"))
  x <- op_convert_to_tensor(3, "float32")
  expect_tensor(f(lst, x), 2 * sin(3), tolerance = 1e-6)
  expect_tensor(op_grad(f, wrt = 2)(lst, x), 2 * cos(3), tolerance = 1e-5)
  compiled <- op_compile(function(x) op_grad(f, wrt = 2)(lst, x))
  expect_tensor(compiled(x), 2 * cos(3), tolerance = 1e-5)
  xs <- c(0, 1, 2)
  mapped <- function() {
    op_vectorized_map(
      op_convert_to_tensor(xs, "float32"),
      op_grad(function(x) f(lst, x))
    )
  }
  if (config_backend() == "tensorflow") {
    expect_error(mapped(), class = "customgrad_error")
  } else {
    expect_tensor(mapped(), 2 * cos(xs), tolerance = 1e-5)
  }
})

test_that("jax CustomVJPTest.test_nondiff_argnums_argnames", {
  skip_if_no_backend()
  app <- op_custom_gradient(function(f, g, x) {
    tuple(f(x) + g(x), function(v) cos(x) * v)
  })
  double <- function(x) 2 * x
  one <- op_convert_to_tensor(1, "float32")
  expect_tensor(app(double, g = double, x = one), 4)
  vg <- op_value_and_grad(function(x) app(double, g = double, x = x))(one)
  expect_tensor(vg$value, 4)
  expect_tensor(vg$grad, cos(1), tolerance = 1e-6)
})

test_that("jax CustomVJPTest.test_closed_over_jit_tracer", {
  skip_if_no_backend()
  # JAX skips this case (its nondiff_argnums no longer take tracers); in
  # customgrad it is a function made inside a compiled one, closing over
  # that function's tensor: not traced, R runs it.
  outer <- function(x) {
    op_custom_gradient(function(y) tuple(x * y, function(g) cos(y) * g))
  }
  g <- op_compile(function(x, y) outer(x)(y))
  x <- op_convert_to_tensor(2, "float32")
  y <- op_convert_to_tensor(3, "float32")
  expect_tensor(suppressMessages(g(x, y)), 6)
  expect_tensor(
    suppressMessages(op_grad(g, wrt = 2)(x, y)),
    cos(3),
    tolerance = 1e-5
  )
})

test_that("jax CustomVJPTest.test_closed_over_vmap_tracer", {
  skip_if_no_backend()
  outer <- function(x) {
    op_custom_gradient(function(y) tuple(x * y, function(g) cos(y) * g))
  }
  three <- op_convert_to_tensor(3, "float32")
  xs <- c(0, 1, 2)
  out <- op_vectorized_map(
    op_convert_to_tensor(xs, "float32"),
    function(x) outer(x)(three)
  )
  expect_tensor(out, xs * 3, tolerance = 1e-6)
})

test_that("jax CustomVJPTest.test_closed_over_tracer3", {
  skip_if_no_backend()
  outer <- function(x) {
    f <- op_custom_gradient(function(y) {
      tuple(x * y, function(g) cos(y) * g * x)
    })
    op_grad(f)
  }
  three <- op_convert_to_tensor(3, "float32")
  xs <- c(0, 1, 2)
  mapped <- function() {
    op_vectorized_map(
      op_convert_to_tensor(xs, "float32"),
      function(x) outer(x)(three)
    )
  }
  if (config_backend() == "tensorflow") {
    expect_error(mapped(), class = "customgrad_error_transform")
  } else {
    expect_tensor(mapped(), cos(3) * xs, tolerance = 1e-5)
  }
})

test_that("jax CustomVJPTest.test_missing_vjp_rule_error", {
  skip_if_no_backend()
  # No rule: f returns its value alone.
  foo <- op_custom_gradient(function(x) x^2)
  x <- op_convert_to_tensor(2, "float32")
  expect_error(foo(x), class = "customgrad_error_f_result")
  expect_error(op_grad(foo)(x), class = "customgrad_error_f_result")
})

test_that("jax CustomVJPTest.test_vjp_rule_inconsistent_pytree_structures_error", {
  skip_if_no_backend()
  # Two gradients for one input.
  f <- op_custom_gradient(function(x) tuple(x, function(g) list(g, g)))
  x <- op_convert_to_tensor(2, "float32")
  expect_error(op_grad(f)(x), class = "customgrad_error_grad_count")
  # Untraced, the forward pass alone runs no rule and succeeds, as in the
  # peer (traced, the rule is traced with f at the first call).
  untraced <- op_custom_gradient(
    function(x) tuple(x, function(g) list(g, g)),
    trace = FALSE
  )
  expect_tensor(untraced(x), 2)
  expect_error(op_grad(untraced)(x), class = "customgrad_error_grad_count")
})

test_that("jax CustomVJPTest.test_vjp_bwd_returns_non_tuple_error", {
  skip_if_no_backend()
  # JAX refuses a bare gradient from custom_vjp's rule; customgrad's
  # contract (like jax.custom_gradient's) takes it for a single input.
  f <- op_custom_gradient(function(x) tuple(x, function(g) 2 * g))
  expect_tensor(op_grad(f)(op_convert_to_tensor(3, "float32")), 2)
})

test_that("jax CustomVJPTest.test_clip_gradient", {
  skip_if_no_backend()
  # The identity whose gradient is clipped to [lo, hi], tensor bounds.
  clip_grad <- op_custom_gradient(function(lo, hi, x) {
    tuple(x, function(g) list(NULL, NULL, op_clip(g, lo, hi)))
  })
  clip_gradient <- function(x) {
    lo <- op_convert_to_tensor(-0.1, "float32")
    hi <- x + 0.1
    clip_grad(lo, hi, x)
  }
  x <- op_convert_to_tensor(0.1, "float32")
  expect_tensor(op_grad(clip_gradient)(x), 0.2, tolerance = 1e-6)
  expect_tensor(op_compile(op_grad(clip_gradient))(x), 0.2, tolerance = 1e-6)
})

test_that("jax CustomVJPTest.test_nestable_vjp", {
  skip_if_no_backend()
  # The rule is the gradient of the plain function, taken inside it.
  g <- op_custom_gradient(function(x) {
    grad <- function(y_bar) {
      op_grad(function(x, u) op_sum(x^2 * u))(x, y_bar)
    }
    tuple(x^2, grad)
  })
  one <- op_convert_to_tensor(1, "float32")
  expect_tensor(op_grad(g)(one), 2)
  z <- op_compile(function(x, ct) {
    op_grad(function(x) op_sum(g(x) * ct))(x)
  })
  expect_tensor(z(one, op_convert_to_tensor(3, "float32")), 6)
})

test_that("jax CustomVJPTest.test_initial_style_vmap_2", {
  skip_if_no_backend()
  custom_fun <- op_custom_gradient(function(x) {
    tuple(op_sum(x), function(g) g * op_ones_like(x))
  })
  train_fun <- function(x) {
    op_grad(function(x) op_sum(op_vectorized_map(x, custom_fun)))(x)
  }
  x <- op_ones(c(10, 3))
  # The peer scans train_fun over 4 steps and asserts no numbers; its
  # definitions give ones at every step.
  run <- function() {
    op_scan(
      function(carry, i) list(carry, train_fun(carry)),
      x,
      xs = op_arange(4)
    )[[2]]
  }
  if (config_backend() == "tensorflow") {
    expect_error(run(), class = "customgrad_error_transform")
  } else {
    out <- run()
    expect_identical(unlist(op_shape(out)), c(4L, 10L, 3L))
    expect_true(all(as.array(out) == 1))
  }
})

test_that("jax CustomVJPTest.test_initial_style_vmap_3", {
  skip_if_no_backend()
  y <- op_convert_to_tensor(c(1, 2, 3), "float32")
  # f closes over a constant array.
  f <- op_custom_gradient(function(x) {
    tuple(3 * x * op_sum(y), function(g) 2 * cos(x) * g)
  })
  foo <- function(x) {
    op_scan(function(carry, z) list(f(carry), NULL), x, length = 1L)[[1]]
  }
  xs <- c(0, 1, 2)
  x <- op_convert_to_tensor(xs, "float32")
  expect_tensor(op_vectorized_map(x, foo), 3 * xs * 6, tolerance = 1e-6)
  grad <- function() op_grad(function(x) op_sum(op_vectorized_map(x, foo)))(x)
  if (config_backend() == "tensorflow") {
    expect_error(grad(), class = "customgrad_error_transform")
  } else {
    expect_tensor(grad(), 2 * cos(xs), tolerance = 1e-5)
  }
})

# JAX's test_bwd_closes_over_tracer and test_fwd_closes_over_tracer: f
# makes a custom gradient whose rule uses f's own input y (directly, or
# through a residual its f computes), jitted, mapped and differentiated:
# JAX's values, or for the mapped cases a classed refusal (TensorFlow's
# vectorized_map() drops custom rules; torch.func can't batch a function
# that R runs at every call).
expect_closes_over_tracer <- function(residual) {
  f <- function(y) {
    inner <- op_custom_gradient(function(x) {
      saved <- if (residual) y + 0 * x else y
      tuple(2 * sin(x), function(g) 2 * cos(saved) * g)
    })
    op_grad(inner)(op_ones_like(y))
  }
  x <- op_convert_to_tensor(c(0, 1, 2), "float32")
  two <- op_convert_to_tensor(2, "float32")
  expect_tensor(
    suppressMessages(op_compile(f)(two)),
    2 * cos(2),
    tolerance = 1e-5
  )
  mapped <- list(
    vmap = \() op_vectorized_map(x, f),
    jit_vmap = \() op_compile(\(x) op_vectorized_map(x, f))(x),
    vmap_jit = \() op_vectorized_map(x, op_compile(f))
  )
  for (run in mapped) {
    got <- tryCatch(
      suppressMessages(run()),
      customgrad_error_transform = function(cnd) cnd
    )
    if (inherits(got, "customgrad_error_transform")) {
      succeed(paste("refused:", conditionMessage(got)))
    } else {
      expect_tensor(got, 2 * cos(c(0, 1, 2)), tolerance = 1e-5)
    }
  }
  # d/dy of the rule's 2 cos(y).
  four <- op_convert_to_tensor(4, "float32")
  expect_tensor(
    suppressMessages(op_grad(f)(four)),
    -2 * sin(4),
    tolerance = 1e-5
  )
}

test_that("jax CustomVJPTest.test_bwd_closes_over_tracer", {
  skip_if_no_backend()
  expect_closes_over_tracer(residual = FALSE)
})

test_that("jax CustomVJPTest.test_fwd_closes_over_tracer", {
  skip_if_no_backend()
  # customgrad has no separate fwd rule: f computes the residual.
  expect_closes_over_tracer(residual = TRUE)
})

test_that("jax CustomVJPTest.test_float0", {
  skip_if_no_backend()
  # The rule gives constants: 2 for x; nothing for the integer input.
  f <- op_custom_gradient(function(x, i) {
    tuple(x, function(g) list(2 * op_ones_like(x), NULL))
  })
  x <- op_convert_to_tensor(2, "float32")
  i <- op_convert_to_tensor(3L, "int32")
  expect_tensor(op_grad(f, wrt = 1)(x, i), 2)
  # JAX gives an integer input a float0 zero gradient; customgrad refuses
  # to differentiate with respect to an integer tensor.
  expect_error(
    op_grad(f, wrt = 1:2)(x, i),
    class = "customgrad_error_wrt_dtype"
  )
})

test_that("jax CustomVJPTest.test_bwd_nones", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x, y) {
    tuple(x * sin(y), function(g) list(NULL, 2 * cos(y) * g))
  })
  three <- op_convert_to_tensor(3, "float32")
  expect_tensor(
    op_grad(function(x) f(x, x))(three),
    2 * cos(3),
    tolerance = 1e-5
  )
})

test_that("jax CustomVJPTest.test_bwd_nones_vmap", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x, y) {
    tuple(x * sin(y), function(g) list(NULL, 2 * cos(y) * g))
  })
  xs <- c(0, 1, 2)
  run <- function() {
    op_grad(function(x) {
      op_sum(op_vectorized_map(x, function(e) f(e, e)))
    })(op_convert_to_tensor(xs, "float32"))
  }
  if (config_backend() == "tensorflow") {
    expect_error(run(), class = "customgrad_error")
  } else {
    expect_tensor(run(), 2 * cos(xs), tolerance = 1e-5)
  }
})

test_that("jax CustomVJPTest.test_bwd_nones_pytree", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(xs, y) {
    tuple(xs[[1]] * xs[[2]] * sin(y), function(g) list(NULL, 2 * cos(y) * g))
  })
  three <- op_convert_to_tensor(3, "float32")
  expect_tensor(
    op_grad(function(x) f(list(x, x), x))(three),
    2 * cos(3),
    tolerance = 1e-5
  )
})

test_that("jax CustomVJPTest.test_float0_bwd_none", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(i, x) {
    tuple(sin(x), function(g) list(NULL, 2 * cos(x) * g))
  })
  i <- op_convert_to_tensor(c(1L, 2L), "int32")
  three <- op_convert_to_tensor(3, "float32")
  expect_tensor(op_grad(f, wrt = 2)(i, three), 2 * cos(3), tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_custom_gradient", {
  skip_if_no_backend()
  # The rule (g x) is not the derivative of x^2: its own derivative is
  # the second derivative, on every backend.
  f <- op_custom_gradient(function(x) tuple(x^2, function(g) list(g * x)))
  three <- op_convert_to_tensor(3, "float32")
  expect_tensor(f(three), 9)
  expect_tensor(op_grad(f)(three), 3)
  expect_tensor(op_grad(op_grad(f))(three), 1)
})

test_that("jax CustomVJPTest.test_custom_gradient_2", {
  skip_if_no_backend()
  # The rule ignores the upstream gradient.
  f <- op_custom_gradient(function(x, y) tuple(x * y, function(g) list(y, x)))
  x <- op_convert_to_tensor(3, "float32")
  y <- op_convert_to_tensor(4, "float32")
  expect_tensor(f(x, y), 12)
  grads <- op_grad(f, wrt = 1:2)(x, y)
  expect_tensor(grads[[1]], 4)
  expect_tensor(grads[[2]], 3)
})

test_that("jax CustomVJPTest.test_custom_gradient_3", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(op_sum(sin(x)), function(g) list(cos(x) * c(3, 4, 5)))
  })
  # An integer input for the value, as in the peer.
  expect_tensor(f(0:2), sum(sin(0:2)), tolerance = 1e-5)
  x <- op_convert_to_tensor(c(0, 1, 2), "float32")
  expect_tensor(op_grad(f)(x), cos(0:2) * 3:5, tolerance = 1e-5)
})

test_that("jax CustomVJPTest.test_custom_gradient_can_return_singleton_value_in_vjp", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) tuple(x^2, function(g) g * x))
  three <- op_convert_to_tensor(3, "float32")
  expect_tensor(f(three), 9)
  expect_tensor(op_grad(f)(three), 3)
  expect_tensor(op_grad(op_grad(f))(three), 1)
})

test_that("jax CustomVJPTest.test_custom_vjp_scan_batching_edge_case", {
  skip_if_no_backend()
  mul <- op_custom_gradient(function(x, coeff) {
    tuple(x * coeff, function(g) list(g * coeff, op_sum(x * g)))
  })
  scan_over_mul <- function(x, coeff) {
    op_scan(
      function(carry, t) list(mul(carry, coeff), NULL),
      x,
      xs = op_arange(3)
    )[[1]]
  }
  # Fixed numbers for the peer's random batch and covector.
  xb <- matrix(c(0.5, -1, 2, 0.25, -0.75, 1.5), 3, 2)
  cov <- matrix(c(1, 2, -1, 0.5, -2, 3), 3, 2)
  loss <- function(x, coeff, cov) {
    mapped <- op_vectorized_map(x, function(r) scan_over_mul(r, coeff))
    op_sum(mapped * cov)
  }
  run <- function() {
    op_grad(loss, wrt = 1:2)(
      op_convert_to_tensor(xb, "float32"),
      op_convert_to_tensor(1, "float32"),
      op_convert_to_tensor(cov, "float32")
    )
  }
  if (config_backend() == "tensorflow") {
    expect_error(run(), class = "customgrad_error")
  } else {
    grads <- run()
    # x coeff^3 over three steps: cov coeff^3, and 3 coeff^2 sum(x cov).
    expect_equal(as.array(grads[[1]]), cov, tolerance = 1e-5)
    expect_tensor(grads[[2]], 3 * sum(xb * cov), tolerance = 1e-5)
  }
})

test_that("jax CustomVJPTest.test_closure_with_vmap2", {
  skip_if_no_backend()
  h <- function(z) {
    f <- function(x) {
      g <- op_custom_gradient(function(y) {
        tuple(x * y, function(w_bar) x * w_bar)
      })
      g(z)
    }
    op_sum(op_vectorized_map(op_convert_to_tensor(c(0, 1, 2), "float32"), f))
  }
  z <- op_convert_to_tensor(3.14, "float32")
  expect_tensor(h(z), 3 * 3.14, tolerance = 1e-6)
  # The peer checks against finite differences: d/dz = 0 + 1 + 2.
  if (config_backend() == "tensorflow") {
    expect_error(op_grad(h)(z), class = "customgrad_error")
  } else {
    expect_tensor(op_grad(h)(z), 3, tolerance = 1e-6)
  }
})

test_that("jax CustomVJPTest.test_vmap_vjp_called_twice", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) tuple(x, function(y_bar) y_bar))
  vjp <- op_grad(function(x) {
    op_sum(op_vectorized_map(x, f) * op_convert_to_tensor(3, "float32"))
  })
  x <- op_convert_to_tensor(3, "float32")
  x <- op_reshape(x, 1L)
  for (i in 1:2) {
    if (config_backend() == "tensorflow") {
      expect_error(vjp(x), class = "customgrad_error")
    } else {
      expect_tensor(vjp(x), 3)
    }
  }
})

test_that("jax CustomVJPTest.test_nones_representing_zeros_in_subtrees_returned_by_bwd", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x) {
    tuple(x[[1]], function(z_bar) list(list(z_bar, list(NULL, NULL))))
  })
  t <- function(v) op_convert_to_tensor(v, "float32")
  x <- list(t(1), list(t(2), t(3)))
  g <- op_grad(f)(x)
  expect_equal(
    lapply(
      list(g[[1]], g[[2]][[1]], g[[2]][[2]]),
      function(t) as.vector(as.array(t))
    ),
    list(1, 0, 0)
  )
})

test_that("jax CustomVJPTest.test_pytree_nones_returned_by_bwd", {
  skip_if_no_backend()
  # A NULL leaf among numbers: JAX's None leaf; customgrad takes no input
  # that mixes numbers with options.
  f <- op_custom_gradient(function(x) {
    tuple(x[[1]], function(z_bar) list(list(z_bar, list(NULL, NULL))))
  })
  expect_error(
    op_grad(f)(list(1, list(2, NULL))),
    class = "customgrad_error_input"
  )
})

test_that("jax CustomVJPTest.test_bwd_rule_shape_mismatch", {
  skip_if_no_backend()
  foo <- op_custom_gradient(function(x, y) {
    tuple(x, function(g) list(op_zeros(3), op_zeros(3)))
  })
  run <- function() {
    op_grad(function(x, y) op_sum(foo(x, y * y)), wrt = 2)(
      op_ones(3),
      op_ones(4)
    )
  }
  expect_error(run(), class = "customgrad_error_grad_shape")
})

test_that("jax CustomVJPTest.test_bwd_rule_can_produce_list_or_tuple", {
  skip_if_no_backend()
  # An R list, not tuple().
  f <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(g) list(g * y, x * g))
  })
  x <- op_convert_to_tensor(1, "float32")
  y <- op_convert_to_tensor(2, "float32")
  expect_tensor(op_grad(f)(x, y), 2)
  grads <- op_grad(f, wrt = 1:2)(x, y)
  expect_tensor(grads[[2]], 1)
})

test_that("jax CustomVJPTest.test_dce", {
  skip_if_no_backend()
  f <- op_custom_gradient(function(x, y) {
    cos_x <- cos(x)
    sin_y <- sin(y)
    grad <- function(cts) {
      list(
        2 * cos_x * cts[[1]] + 1.5 * cts[[2]],
        -0.5 * sin_y * cts[[2]]
      )
    }
    tuple(list(sin(x), x + cos(y)), grad)
  })
  x <- op_convert_to_tensor(0.1, "float32")
  y <- op_convert_to_tensor(-1.3, "float32")
  # Each output alone: the other's upstream gradient is zero.
  first <- op_grad(function(x, y) f(x, y)[[1]], wrt = 1:2)(x, y)
  expect_tensor(first[[1]], 2 * cos(0.1), tolerance = 1e-5)
  expect_tensor(first[[2]], 0)
  second <- op_grad(function(x, y) f(x, y)[[2]], wrt = 1:2)(x, y)
  expect_tensor(second[[1]], 1.5, tolerance = 1e-6)
  expect_tensor(second[[2]], -0.5 * sin(-1.3), tolerance = 1e-5)
})
