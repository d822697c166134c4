# Helpers for test-keras3.R (customgrad next to keras3 in a user's session)
# and test-tensor-ops.R (R methods of backend tensors against base R).

# --- A fresh R session --------------------------------------------------------

# Run `fun(...)` in a new R process on the same library paths and the same
# Keras backend as this one, and return its value. `fun` must be
# self-contained: callr runs it with the child's global environment.
# `same_python = TRUE` gives the child this session's Python, for a child
# that runs keras3 without customgrad (which otherwise chooses it).
run_in_fresh_r <- function(
  fun,
  args = list(),
  backend = config_backend(),
  same_python = FALSE
) {
  env <- c(callr::rcmd_safe_env(), KERAS_BACKEND = backend)
  if (same_python) {
    env <- c(env, RETICULATE_PYTHON = reticulate::py_exe())
  }
  callr::r(fun, args = args, libpath = .libPaths(), env = env, show = FALSE)
}

# Run in a fresh R process, as a user would: attach `packages` in that order,
# then run the example of ?op_custom_gradient and the log1pexp gradient of
# the issue. Returns what the attach printed, where op_custom_gradient was
# found, and the gradients (or the error message of each step).
attach_and_differentiate <- function(packages) {
  log <- new.env()
  log$attach <- character()
  log$later <- character()
  catcher <- function(slot) {
    function(cnd) {
      log[[slot]] <- c(log[[slot]], conditionMessage(cnd))
      if (inherits(cnd, "message")) {
        invokeRestart("muffleMessage")
      } else {
        invokeRestart("muffleWarning")
      }
    }
  }
  # Run `expr` quietly; its value, or its error message as "error: ...".
  step <- function(expr) {
    result <- NULL
    utils::capture.output(
      result <- tryCatch(
        withCallingHandlers(
          expr,
          message = catcher("later"),
          warning = catcher("later")
        ),
        error = function(cnd) paste("error:", conditionMessage(cnd))
      )
    )
    result
  }

  # 1. Attach, capturing everything it prints.
  attach_output <- utils::capture.output(
    withCallingHandlers(
      for (pkg in packages) {
        library(pkg, character.only = TRUE)
      },
      message = catcher("attach"),
      warning = catcher("attach")
    )
  )
  found <- get("op_custom_gradient", envir = globalenv(), mode = "function")
  made <- found(function(x) tuple(x, function(upstream) upstream))
  backend <- keras3::config_backend()
  identity_value <- step(as.vector(as.array(made(c(1, 2)))))

  # 2. The example of ?op_custom_gradient, as the user runs it.
  example_result <- step({
    utils::example(
      "op_custom_gradient",
      package = "customgrad",
      character.only = TRUE,
      ask = FALSE
    )
    "ok"
  })

  # 3. The issue: d/dx log1pexp(x) at x = 100 is 1. Defined here, in the
  # global environment, it uses whichever op_custom_gradient is attached.
  log1pexp <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    grad <- function(..., upstream = NULL) {
      upstream <- upstream %||% ..1
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
  # The same without the default: grad(..., upstream).
  log1pexp_no_default <- op_custom_gradient(\(x) {
    e <- op_exp(x)
    grad <- function(..., upstream) {
      op_multiply(upstream, 1.0 - 1.0 / op_add(1, e))
    }
    tuple(op_log(1 + e), grad)
  })
  # The gradient at 100 with the backend's own autodiff.
  native <- function(h) {
    switch(
      backend,
      tensorflow = {
        library(tensorflow)
        tf <- tensorflow::tf
        x <- tf$constant(100)
        with(tf$GradientTape() %as% tape, {
          tape$watch(x)
          y <- h(x)
        })
        as.vector(as.array(tape$gradient(y, x)))
      },
      jax = {
        jax <- reticulate::import("jax")
        as.vector(as.array(jax$grad(h)(100)))
      },
      torch = {
        torch <- reticulate::import("torch", convert = FALSE)
        x <- torch$tensor(100, requires_grad = TRUE)
        h(x)$backward()
        as.vector(as.array(x$grad))
      }
    )
  }
  agnostic <- function(h) as.vector(as.array(op_grad(h)(100)))

  list(
    backend = backend,
    attach_messages = log$attach,
    attach_output = attach_output,
    found_in = environmentName(environment(found)),
    made_class = class(made),
    identity_value = identity_value,
    example = example_result,
    native = step(native(log1pexp)),
    agnostic = step(agnostic(log1pexp)),
    value_at_2 = step(as.vector(as.array(log1pexp(2)))),
    no_default_native = step(native(log1pexp_no_default)),
    no_default_agnostic = step(agnostic(log1pexp_no_default)),
    later_messages = log$later,
    # after library(tensorflow) too
    found_in_at_end = environmentName(environment(
      get("op_custom_gradient", envir = globalenv(), mode = "function")
    ))
  )
}

# The (name, package) pairs that R's masking notes in `messages` report, as
# "name from package" strings.
masking_notes <- function(messages) {
  text <- paste(messages, collapse = "\n")
  pattern <- "masked from .package:([[:alnum:].]+).:\n\n((?:    [^\n]+\n?)+)"
  hits <- regmatches(text, gregexpr(pattern, text, perl = TRUE))[[1]]
  unlist(lapply(hits, function(hit) {
    from <- sub(pattern, "\\1", hit, perl = TRUE)
    names <- strsplit(trimws(sub(pattern, "\\2", hit, perl = TRUE)), "\\s+")
    paste(names[[1]], "from", from)
  }))
}

# What a fresh session reports, checked: one masking note (customgrad's
# op_custom_gradient over keras3's), no S3 overwrite note, customgrad's
# op_custom_gradient found, and the gradients of the issue exactly 1.
expect_fresh_session_ok <- function(result) {
  attach_text <- c(result$attach_messages, result$attach_output)
  # Whatever the order, keras3 is attached first (library(customgrad)
  # attaches it), and customgrad's op_custom_gradient masks keras3's.
  expect_identical(masking_notes(attach_text), "op_custom_gradient from keras3")
  expect_false(any(grepl("overwritten", attach_text, ignore.case = TRUE)))
  expect_false(any(grepl(
    "overwritten",
    result$later_messages,
    ignore.case = TRUE
  )))
  expect_identical(result$found_in, "customgrad")
  expect_identical(result$found_in_at_end, "customgrad")
  expect_true("customgrad_function" %in% result$made_class)
  expect_equal(result$identity_value, c(1, 2))
  expect_identical(result$example, "ok")
  expect_equal(result$value_at_2, log1p(exp(2)), tolerance = 1e-6)
  expect_identical(result$native, 1)
  expect_identical(result$agnostic, 1)
  expect_identical(result$no_default_native, 1)
  expect_identical(result$no_default_agnostic, 1)
}

# --- R expressions on tensors against base R ----------------------------------

# A tensor, or anything else, as a plain R value: a tensor's values as an
# array (through as.array(): tensorflow R's as.vector() is broken upstream)
# and a scalar tensor as a number.
r_value_of <- function(x) {
  if (!inherits(x, "python.builtin.object")) {
    return(x)
  }
  values <- as.array(x)
  if (length(dim(values)) <= 1L) as.vector(values) else values
}

# The shape of an R value: dim(), or the length of a vector (a scalar tensor
# and an R number both have shape 1).
r_shape_of <- function(x) {
  d <- dim(x)
  if (is.null(d)) length(x) else d
}

# Evaluate `code` (a string) with `env`'s bindings, returning the value or
# the condition it raised.
eval_code <- function(code, env) {
  tryCatch(eval(parse(text = code)[[1]], env), error = identity)
}

# The messages of the Python warnings raised while `expr` runs.
python_warnings_during <- function(expr) {
  warnings <- reticulate::import("warnings", convert = FALSE)
  recorder <- warnings$catch_warnings(record = TRUE)
  # (self-contained: it also runs in fresh R processes without the helpers)
  caught <- recorder$`__enter__`()
  on.exit(recorder$`__exit__`(NULL, NULL, NULL))
  warnings$simplefilter("always")
  force(expr)
  n <- reticulate::py_len(caught)
  vapply(
    seq_len(n) - 1L,
    function(i) reticulate::py_str(reticulate::py_get_item(caught, i)$message),
    ""
  )
}

# --- Printing -----------------------------------------------------------------

# Expect the printed line labelled `label` ("[1,]") to hold `values`, in
# order, with `...` between its halves.
expect_corner_row <- function(lines, label, values) {
  line <- lines[startsWith(lines, label)]
  testthat::expect_length(line, 1)
  fields <- strsplit(trimws(line), " +")[[1]]
  testthat::expect_identical(fields[[1]], label)
  shown <- fields[-1]
  testthat::expect_identical(shown[[length(shown) / 2 + 0.5]], "...")
  testthat::expect_equal(as.numeric(shown[shown != "..."]), values)
}

# What print() of a matrix tensor shows when it shows rows `rows` and
# columns `cols` (1-based) of it: built in R from the whole matrix.
print_lines_of_corners <- function(x, rows, cols) {
  values <- as.array(x)[rows, cols]
  text <- format(values)
  dim(text) <- dim(values)
  half_r <- length(rows) / 2
  half_c <- length(cols) / 2
  text <- cbind(text[, 1:half_c], "...", text[, -(1:half_c)])
  text <- rbind(text[1:half_r, ], "...", text[-(1:half_r), ])
  dimnames(text) <- list(
    c(
      sprintf("[%d,]", rows[1:half_r]),
      "",
      sprintf("[%d,]", rows[-(1:half_r)])
    ),
    c(sprintf("[,%d]", cols[1:half_c]), "", sprintf("[,%d]", cols[-(1:half_c)]))
  )
  c(
    capture.output(print(x))[[1]],
    capture.output(print(text, quote = FALSE, right = TRUE))
  )
}

# --- keras3's model API -------------------------------------------------------

# Dense "below" -> a Lambda layer around `middle` -> dense "above".
dense_lambda_dense <- function(middle, units) {
  keras_model_sequential(input_shape = 3) |>
    layer_dense(units, name = "below") |>
    layer_lambda(middle) |>
    layer_dense(1, name = "above")
}

# --- keras3 code mixing variables and tensors ---------------------------------

# Run in a fresh R process: attach keras3, and customgrad if asked, then
# run keras3 code in which Keras variables meet tensors and tracers: a
# constraint and a regularizer computing with the weight (keras3's "R
# custom constraints" test), a custom layer multiplying its weight by its
# input, eager arithmetic and comparison, and a symbolic input times a
# variable. Returns the values, and the warnings seen ("Incompatible
# methods" on R < 4.3 when the operands find different methods).
keras3_mixing_variables <- function(attach_customgrad) {
  library(keras3)
  if (attach_customgrad) {
    library(customgrad)
  }
  warned <- character()
  result <- withCallingHandlers(
    {
      keras3::set_random_seed(1)
      nonneg <- function(w) w * op_cast(w >= 0, config_floatx())
      constraint_nonneg <- Constraint("NonNeg", public = list(call = nonneg))
      positive_l2 <- function(w) {
        0.01 * op_sum(w * w * op_cast(w > 0, "float32"))
      }
      layer_scale <- Layer(
        "Scale",
        build = function(input_shape) {
          self$s <- self$add_weight(
            shape = shape(input_shape[[2]]),
            initializer = "ones"
          )
        },
        call = function(x) self$s * x
      )
      model <- keras_model_sequential(input_shape = 4) |>
        layer_dense(
          3,
          kernel_constraint = constraint_nonneg(),
          bias_constraint = nonneg,
          kernel_regularizer = positive_l2
        ) |>
        layer_scale() |>
        layer_dense(1)
      model |> compile(optimizer = optimizer_sgd(0.05), loss = "mse")
      x <- matrix(seq(0, 1, length.out = 32 * 4), 32, 4)
      y <- x %*% c(1, -1, 2, 0.5) - 0.5
      history <- model |>
        fit(x, y, epochs = 2, batch_size = 8, shuffle = FALSE, verbose = 0)

      v <- keras$Variable(c(-1, 2, -3), dtype = "float32")
      t <- op_convert_to_tensor(c(2, 2, 2), dtype = "float32")
      input <- keras_input(shape = 3)
      eager <- list(
        v * t,
        t - v,
        v + 1,
        2 / v,
        v > t,
        t == v,
        -v,
        v * v
      )
      list(
        loss = history$metrics$loss,
        weights = lapply(model$get_weights(), as.array),
        prediction = as.array(predict(model, x[1:2, ], verbose = 0)),
        eager = lapply(eager, function(e) as.vector(as.array(e))),
        # (On TensorFlow, a symbolic tensor finds reticulate's `*` and a
        # variable tensorflow R's, with keras3 alone too: not compared.)
        symbolic_shape = if (config_backend() != "tensorflow") {
          unlist(reticulate::py_to_r((input * v)$shape))
        }
      )
    },
    warning = function(cnd) {
      warned <<- c(warned, conditionMessage(cnd))
      invokeRestart("muffleWarning")
    }
  )
  result$warnings <- warned
  result
}

# The S3 method `x` finds for `generic` (a group such as "Ops", or an
# operator), as R's dispatch finds it: the first of its classes with one.
s3_method_of <- function(generic, x) {
  for (class in class(x)) {
    method <- utils::getS3method(generic, class, optional = TRUE)
    if (!is.null(method)) {
      return(method)
    }
  }
  NULL
}
