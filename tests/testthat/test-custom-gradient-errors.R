test_that("an R error in f reaches the caller as the original condition", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    rlang::abort("f failed on purpose", class = "my_error")
  })
  expect_error(h(1), "f failed on purpose", class = "my_error")
  # and under each backend's autodiff too
  expect_error(native_grad(h, 1), "f failed on purpose")
})

test_that("an R error in grad is never a NaN gradient", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, function(upstream) {
      rlang::abort("grad failed on purpose", class = "my_grad_error")
    })
  })
  expect_error(native_grad(h, 1), "grad failed on purpose")
  expect_error(customgrad_call(native_grad(h, 1)), class = "my_grad_error")
})

test_that("f must return tuple(value, grad)", {
  skip_if_no_backend()
  value_only <- op_custom_gradient(function(x) x * 2)
  expect_error(value_only(1), class = "customgrad_error_f_result")
  expect_error(
    native_grad(value_only, 1),
    "must return `tuple(value, grad)`",
    fixed = TRUE
  )
  three <- op_custom_gradient(function(x) list(x, function(u) u, 3))
  expect_snapshot(three(1), error = TRUE)
  not_fun <- op_custom_gradient(function(x) tuple(x, 1))
  expect_error(not_fun(1), class = "customgrad_error_grad_not_function")
  no_args <- op_custom_gradient(function(x) tuple(x, function() 1))
  expect_error(no_args(1), class = "customgrad_error_grad_signature")
})

test_that("a wrong number of gradients is a classed error naming both counts", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, y) {
    tuple(x * y, function(upstream) list(upstream * y, upstream * x, upstream))
  })
  err <- expect_error(
    customgrad_call(native_grads(h, 1, 2)),
    class = "customgrad_error_grad_count"
  )
  expect_match(
    conditionMessage(err),
    "must return 2 gradients, one per tensor input of `f`.\nx It returned 3.",
    fixed = TRUE
  )
  expect_identical(
    err$details,
    list(expected = 2L, tensors = 2L, returned = 3L)
  )
  # said once: the Python error is kept as a field, not printed again
  printed <- paste(format(err), collapse = "\n")
  expect_identical(lengths(gregexpr("must return 2 gradients", printed)), 1L)
  expect_s3_class(err$python_error, "error")
  expect_s3_class(err$python_error, "customgrad.errors.GradientCountError")
})

test_that("a gradient of the wrong shape is a classed error naming both shapes", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(sum(x), function(upstream) op_convert_to_tensor(c(1, 2, 3)))
  })
  err <- expect_error(
    customgrad_call(native_grad(h, matrix(1, 2, 2))),
    class = "customgrad_error_grad_shape"
  )
  expect_match(
    conditionMessage(err),
    "The gradient for input 1 has shape (3); the input has shape (2, 2).",
    fixed = TRUE
  )
  bad_nest <- op_custom_gradient(function(xs) {
    tuple(sum(xs[[1]]), function(u) list(list(u, u, u)))
  })
  expect_error(
    customgrad_call(native_grads(bad_nest, list(1, 2))),
    class = "customgrad_error_grad_structure"
  )
})

run_in_thread <- function(fn, x) {
  run <- reticulate::py_run_string(
    "
import threading
def run_in_thread(fn, x):
    out = {}
    def target():
        try:
            fn(x)
        except Exception as exc:
            out['error'] = exc
    t = threading.Thread(target=target)
    t.start()
    t.join()
    return out.get('error')
",
    convert = FALSE
  )$run_in_thread
  reticulate::py_call(run, fn, x)
}

test_that("R is never entered from a non-main Python thread", {
  skip_if_no_backend()
  calls <- 0
  h <- op_custom_gradient(
    function(x) {
      calls <<- calls + 1
      tuple(x, function(upstream) upstream)
    },
    trace = FALSE
  )
  h(1)
  calls <- 0
  err <- run_in_thread(environment(h)$.customgrad_state$py, 1)
  expect_identical(calls, 0)
  expect_true(inherits(err, "customgrad.errors.ThreadError"))
  # The thread it was called on, among the facts R writes its message from.
  expect_match(reticulate::py_to_r(err$details)$thread, "^Thread-")
})

test_that("a signature traced on the main thread runs on other threads", {
  skip_if_no_backend()
  calls <- 0
  h <- op_custom_gradient(function(x) {
    calls <<- calls + 1
    tuple(x * 2, function(upstream) upstream * 2)
  })
  x <- op_convert_to_tensor(3, "float32")
  h(x)
  err <- run_in_thread(environment(h)$.customgrad_state$py, x)
  expect_null(reticulate::py_to_r(err))
  expect_identical(calls, 1)
})

# --- The bad-input matrix (tests/README.md lists every case) ----------------

test_that("bad arguments are classed errors, and the session goes on", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 10, function(upstream) upstream * 10)
  })
  cases <- list(
    "NA" = list(NA, "customgrad_error_na"),
    "NA in a double vector" = list(c(1, NA), "customgrad_error_na"),
    "NA in an integer matrix" = list(
      matrix(c(1L, NA), 1),
      "customgrad_error_na"
    ),
    "factor" = list(factor("a"), "customgrad_error_input"),
    "data frame" = list(data.frame(a = 1:2), "customgrad_error_input"),
    "list mixing numbers and options" = list(
      list(1, "a"),
      "customgrad_error_input"
    ),
    "complex" = list(1i, "customgrad_error_input"),
    "NULL (an option, no value to compute)" = list(
      NULL,
      "customgrad_error_f_result"
    )
  )
  for (case in names(cases)) {
    expect_error(
      h(cases[[case]][[1]]),
      class = cases[[case]][[2]],
      label = case
    )
  }
  expect_error(h(data.frame(a = 1)), "as.matrix()", fixed = TRUE)
  # An empty vector is a tensor of shape (0), as keras3 makes it.
  expect_tensor(h(numeric(0)), numeric(0))
  # NaN is a value: it passes, and so does the session.
  expect_tensor(h(c(1, NaN)), c(10, NaN))
  expect_tensor(op_grad(h)(2), 10)
})

test_that("a gradient that isn't floating point is a classed error, never a cast", {
  skip_if_no_backend()
  grads <- list(
    "NA" = \(upstream) NA,
    "upstream * NA" = \(upstream) upstream * NA,
    "a string" = \(upstream) "a",
    "a complex number" = \(upstream) 1i,
    "a logical" = \(upstream) TRUE,
    "an integer tensor" = \(upstream) op_cast(upstream, "int32")
  )
  for (case in names(grads)) {
    for (trace in list(TRUE, FALSE)) {
      if (
        case == "upstream * NA" &&
          isFALSE(trace) &&
          config_backend() == "tensorflow"
      ) {
        # Untraced, grad gets eager TensorFlow tensors, whose arithmetic is
        # tensorflow R's (customgrad overwrites no method): left alone.
        next
      }
      h <- op_custom_gradient(
        function(x) tuple(x * 2, grads[[case]]),
        trace = trace
      )
      expect_error(
        op_grad(h)(1),
        class = if (grepl("NA", case, fixed = TRUE)) {
          c("customgrad_error")
        } else {
          "customgrad_error_grad_dtype"
        },
        label = paste(case, "with trace =", trace)
      )
    }
  }
  h <- op_custom_gradient(function(x) tuple(x * 2, \(upstream) 1i))
  expect_error(op_grad(h)(1), "has dtype \"complex", fixed = TRUE)
})

test_that("an R NA met in tensor arithmetic is an error, not TRUE", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) tuple(x * NA, \(upstream) upstream))
  expect_error(h(1), class = "customgrad_error_na")
  x <- op_convert_to_tensor(c(1, 2), "float32")
  if (config_backend() == "tensorflow") {
    # Eager TensorFlow tensors keep tensorflow R's methods (customgrad
    # overwrites none): a double NA is NaN there.
    expect_tensor(x * c(NA, 1), c(NaN, 2))
  } else {
    expect_error(x * c(NA, 1), class = "customgrad_error_na")
    expect_error(x * NA, class = "customgrad_error_na")
  }
})

# --- Errors in the user's code, in every mode -------------------------------

test_that("a classed error in f or grad keeps its class in every mode, fit() included", {
  skip_if_no_backend()
  failing <- list(
    f = function(x) rlang::abort("f failed", class = "my_error"),
    grad = function(x) {
      tuple(x * 2, \(upstream) rlang::abort("grad failed", class = "my_error"))
    }
  )
  for (where in names(failing)) {
    for (trace in list(TRUE, FALSE)) {
      h <- op_custom_gradient(failing[[where]], trace = trace)
      label <- paste("in", where, "with trace =", trace)
      # eager, and under op_grad() and op_compile()
      expect_error(
        op_grad(h)(1),
        paste(where, "failed"),
        class = "my_error",
        label = label
      )
      expect_error(
        op_compile(op_grad(h))(op_convert_to_tensor(1, "float32")),
        paste(where, "failed"),
        class = "my_error",
        label = label
      )
      # through Keras: f fails when the model is built, the R class
      # first; grad in fit(), whose steps customgrad serves (layer onto a
      # Sequential model: serve_host_ops()), as customgrad_error_grad that
      # keeps the R class
      err <- expect_error(
        {
          model <- keras_model_sequential(input_shape = 2) |>
            layer_dense(2) |>
            layer_custom_gradient(h) |>
            layer_dense(1)
          model |> compile(optimizer = "sgd", loss = "mse")
          model |> fit(matrix(1:4, 2), c(1, 2), verbose = 0)
        },
        paste(where, "failed"),
        class = "my_error",
        label = label
      )
      first <- if (where == "grad" && !trace) "customgrad_error_grad"
      expect_identical(class(err)[[1]], first %||% "my_error", label = label)
    }
  }
})

test_that("a classed error while tracing is raised at once, without the fallback message", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    tuple(x * 2, \(upstream) rlang::abort("grad failed", class = "my_error"))
  })
  expect_no_message(expect_error(op_grad(h)(1), class = "my_error"))
})

test_that("a warning in f or grad stays a warning and the result comes back", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) {
    warning("f warns")
    tuple(x * 2, \(upstream) {
      warning("grad warns")
      upstream * 2
    })
  })
  expect_warning(expect_warning(g <- op_grad(h)(1), "f warns"), "grad warns")
  expect_tensor(g, 2)
})

test_that("a tensor of another backend is a classed error naming both", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x) tuple(x * 2, \(upstream) upstream * 2))
  other <- if (config_backend() == "torch") "jax" else "torch"
  foreign <- switch(
    other,
    torch = reticulate::import("torch", convert = FALSE)$ones(2L),
    jax = reticulate::import("jax.numpy", convert = FALSE)$ones(2L)
  )
  err <- expect_error(h(foreign), class = "customgrad_error_input")
  expect_match(conditionMessage(err), paste("A", other, "tensor"), fixed = TRUE)
  expect_match(conditionMessage(err), config_backend(), fixed = TRUE)
  expect_tensor(h(c(1, 2)), c(2, 4))
})

test_that("Python threads calling custom-gradient functions, with a collection due, never abort R or hang", {
  skip_if_no_backend()
  skip_if_no_callr()
  # In a child R process with a time limit: an abort or a hang there fails
  # this test instead of ending the test run.
  result <- callr::r(
    function() {
      library(customgrad)
      # A collection is due at every boundary (the issue's abort needed a
      # memory-triggered gc() while a thread was in customgrad).
      options(customgrad.gc_threshold_mb = 1e-6)
      untraced <- op_custom_gradient(
        function(x) tuple(x * 2, \(upstream) upstream * 2),
        trace = FALSE
      )
      traced <- op_custom_gradient(function(x) {
        tuple(x * 3, \(upstream) upstream * 3)
      })
      x <- op_convert_to_tensor(c(1, 2), "float32")
      untraced(x)
      traced(x) # traced on the main thread
      ballast <- lapply(1:50, \(i) rnorm(1e4))
      run <- reticulate::py_run_string(
        paste(
          "def run(untraced, traced, x, n=50):",
          "    import threading",
          "    out = {'thread_errors': 0, 'other_errors': [], 'values': []}",
          "    def work():",
          "        for _ in range(n):",
          "            try:",
          "                untraced(x)",
          "            except Exception as e:",
          "                if type(e).__name__ == 'ThreadError':",
          "                    out['thread_errors'] += 1",
          "                else:",
          "                    out['other_errors'].append(repr(e))",
          "            out['values'].append(float(traced(x)[1]))",
          "    t = threading.Thread(target=work)",
          "    t.start()",
          "    t.join(60)",
          "    out['finished'] = not t.is_alive()",
          "    return out",
          sep = "\n"
        ),
        local = TRUE,
        convert = FALSE
      )$run
      out <- reticulate::py_to_r(run(
        reticulate::r_to_py(untraced),
        reticulate::r_to_py(traced),
        x
      ))
      rm(ballast)
      gc()
      out$after <- as.array(op_grad(\(x) op_sum(untraced(x)))(x))
      out
    },
    libpath = .libPaths(),
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = config_backend()),
    timeout = 300
  )
  expect_true(result$finished)
  expect_identical(result$thread_errors, 50L)
  expect_length(result$other_errors, 0)
  expect_identical(unlist(result$values), rep(6, 50))
  expect_equal(as.vector(result$after), c(2, 2))
})

# --- The backend's errors in f and grad --------------------------------------

test_that("a backend's error in f names the call and the arguments, traced or not", {
  skip_if_no_backend()
  for (trace in c(TRUE, FALSE)) {
    h <- op_custom_gradient(
      function(x) tuple(op_multiply(x, 10), function(upstream) upstream * 10),
      trace = trace
    )
    for (bad in list("a", NULL)) {
      err <- expect_error(h(bad), class = "customgrad_error_f")
      expect_s3_class(err, "customgrad_error")
      # the backend's error is the parent, and its classes stay
      expect_s3_class(err$parent, "python.builtin.Exception")
      expect_s3_class(err, "python.builtin.Exception")
      expect_identical(conditionCall(err), quote(h(bad)))
      expect_match(
        conditionMessage(err),
        if (is.null(bad)) "`x` = NULL" else "`x` = a string (\"a\")",
        fixed = TRUE
      )
    }
    caught <- tryCatch(h("a"), python.builtin.Exception = function(e) "caught")
    expect_identical(caught, "caught")
  }
  # The session goes on.
  expect_tensor(h(2), 20)
})

test_that("a backend's error in grad is customgrad_error_grad on every route", {
  skip_if_no_backend()
  for (trace in c(TRUE, FALSE)) {
    h <- op_custom_gradient(
      function(x) tuple(x * 2, function(upstream) op_multiply(upstream, "a")),
      trace = trace
    )
    err <- expect_error(
      suppressMessages(op_grad(function(x) op_sum(h(x)))(c(1, 2))),
      class = "customgrad_error_grad"
    )
    expect_s3_class(err, "python.builtin.Exception")
    expect_match(conditionMessage(err), "gradient function", fixed = TRUE)
    expect_error(
      suppressMessages(customgrad_call(native_grad(h, c(1, 2)))),
      class = "customgrad_error_grad"
    )
  }
})

test_that("a backend's error inside a nested call keeps its class at the top", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, label) {
    tuple(op_multiply(x, label), function(upstream) upstream)
  })
  err <- expect_error(
    op_grad(function(x) op_sum(h(x, "a")))(c(1, 2)),
    class = "customgrad_error_f"
  )
  expect_s3_class(err, "python.builtin.Exception")
  expect_match(conditionMessage(err), "`label` = a string", fixed = TRUE)
  # errors the user raises keep their own class, as before
  mine <- op_custom_gradient(function(x) {
    rlang::abort("mine", class = "my_error")
  })
  expect_error(mine(1), class = "my_error")
})

test_that("a wrong count with options names both accepted counts", {
  skip_if_no_backend()
  h <- op_custom_gradient(function(x, label) {
    tuple(x * 2, function(upstream) list(upstream, upstream, upstream))
  })
  err <- expect_error(
    customgrad_call(op_grad(function(x) op_sum(h(x, "a")))(1)),
    class = "customgrad_error_grad_count"
  )
  expect_identical(
    err$details,
    list(expected = 2L, tensors = 1L, returned = 3L)
  )
  expect_snapshot(
    op_grad(function(x) op_sum(h(x, "a")))(1),
    error = TRUE
  )
})
