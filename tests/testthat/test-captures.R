# The fallback messages `expr` gives (evaluated in the caller's frame), in
# order: a changed value makes every traced function that reads it say so.
fallback_messages <- function(expr) {
  messages <- character()
  withCallingHandlers(
    expr,
    customgrad_message_fallback = function(cnd) {
      messages <<- c(messages, conditionMessage(cnd))
      invokeRestart("muffleMessage")
    }
  )
  messages
}

test_that("captured_bindings() finds what f reads from outside, through R functions", {
  scale <- 3
  offset <- c(1, 2)
  helper <- function(x) x + offset
  runs <- 0
  f <- function(x) {
    runs <<- runs + 1 # f's own state: not a captured value
    helper(x) * scale + sum(pi)
  }
  found <- captured_bindings(f)
  names <- vapply(found, `[[`, "", "name")
  expect_setequal(names, c("helper", "offset", "scale"))
  expect_identical(found[[which(names == "scale")]]$value, 3)
  # Nothing from packages (sum, pi, +): no binding to check at each call.
  expect_null(captured_bindings(function(x) sum(x) * pi))
  expect_null(captured_bindings(sin))
  # A transform's own function is followed.
  h <- op_custom_gradient(function(x) {
    tuple(x * scale, function(upstream) upstream * scale)
  })
  expect_identical(
    vapply(captured_bindings(function(x) h(x)), `[[`, "", "name"),
    c("h", "scale")
  )
})

test_that("a function's code is read once; each closure of it checks its own values", {
  skip_if_no_backend()
  # codetools' walk over a function's code, counted.
  n <- 0
  count <- function() n <<- n + 1
  reads <- function() n
  suppressMessages(trace(
    "findGlobals",
    tracer = bquote(.(count)()),
    where = asNamespace("codetools"),
    print = FALSE
  ))
  withr::defer(suppressMessages(untrace(
    "findGlobals",
    where = asNamespace("codetools")
  )))
  scaled <- function(scale) {
    list(
      g = op_grad(function(x) op_sum(op_multiply(x, scale))),
      env = environment()
    )
  }
  x <- op_convert_to_tensor(c(1, 1))
  g2 <- scaled(2)$g
  expect_tensor(g2(x), c(2, 2))
  read_once <- reads()
  expect_gt(read_once, 0)
  three <- scaled(3) # the same code: read no more
  g3 <- three$g
  expect_tensor(g3(x), c(3, 3))
  expect_identical(reads(), read_once)
  # Each closure's own value is what is checked and replayed.
  three$env$scale <- 5
  expect_message(
    expect_tensor(g3(x), c(5, 5)),
    "`scale` has changed",
    class = "customgrad_message_fallback"
  )
  expect_no_message(expect_tensor(g2(x), c(2, 2)))
  # Other code is read.
  expect_tensor(op_grad(function(x) op_sum(x * 4))(x), c(4, 4))
  expect_gt(reads(), read_once)
})

test_that("changed_capture() sees a binding changed, modified in place or removed", {
  local_env <- new.env()
  local(
    {
      a <- c(1, 2, 3)
      b <- 2
      f <- function(x) x * a + b
    },
    envir = local_env
  )
  found <- captured_bindings(local_env$f)
  expect_null(changed_capture(found))
  local_env$b <- 2 # the same value again: nothing changed
  expect_null(changed_capture(found))
  local_env$a[2] <- 5 # R copies the recorded vector: a changed
  expect_identical(changed_capture(found), "a")
  local_env$a[2] <- 2
  expect_null(changed_capture(found))
  rm("b", envir = local_env)
  expect_identical(changed_capture(found), "b")
})

test_that("op_grad() of f reading a changed R value runs R from then on, with right gradients", {
  skip_if_no_backend()
  w <- op_convert_to_tensor(c(1, 2, 3))
  a <- 2
  runs <- 0
  g <- op_grad(function(x) {
    runs <<- runs + 1
    op_sum(op_multiply(op_multiply(x, w), a)) # TF: no R arithmetic on w
  })
  x <- op_convert_to_tensor(c(1, 1, 1))
  expect_tensor(g(x), c(2, 4, 6))
  expect_no_message(expect_tensor(g(x), c(2, 4, 6)))
  expect_identical(runs, 1) # traced once, replayed since
  w <- w * 2
  expect_message(
    expect_tensor(g(x), c(4, 8, 12)),
    "`w` has changed since `op_grad\\(function",
    class = "customgrad_message_fallback"
  )
  a <- 3 # R runs f at every call, once told
  expect_no_message(expect_tensor(g(x), c(6, 12, 18)))
  expect_identical(runs, 3)
})

test_that("a changed R value read by f that R runs at every call already says nothing more", {
  skip_if_no_backend()
  # Its one trace failed (R's random numbers): no trace holds the old
  # value, yet a changed `a` said the trace held it.
  a <- 2
  noisy <- function(x) op_sum(x * a) + 0 * stats::runif(1)
  g <- op_grad(noisy)
  fc <- op_compile(noisy)
  x <- op_convert_to_tensor(c(1, 1, 1))
  expect_message(expect_tensor(g(x), c(2, 2, 2)), "could not be traced")
  expect_message(expect_tensor(fc(x), 6), "could not be traced")
  a <- 3
  expect_no_message(expect_tensor(g(x), c(3, 3, 3)))
  expect_no_message(expect_tensor(fc(x), 9))
})

test_that("untraceable_reads() names own <<- state read besides its update", {
  n <- 0
  step <- 0
  counter <- function(x) {
    n <<- n + 1 # updated only: traced, counts traces
    x
  }
  expect_identical(untraceable_reads(counter), character())
  schedule <- function(x) {
    step <<- step + 1
    x * min(1, step / 2) # read: a trace would fix it at one step
  }
  expect_identical(
    untraceable_reads(schedule),
    "`step`, a variable it also assigns with `<<-`,"
  )
  expect_match(
    untraceable_reads(function(x) x * as.numeric(Sys.time())),
    "the clock (`Sys.time()`)",
    fixed = TRUE
  )
  # A user's own function of that name is not the clock.
  Sys.time <- function() 1 # nolint: object_name_linter.
  expect_identical(untraceable_reads(function(x) x * Sys.time()), character())
})

test_that("a function made inside a traced one and reading its tensor is not traced", {
  skip_if_no_backend()
  z <- keras_input(shape = 1L) # a symbolic tensor, as while tracing
  # JAX's CustomVJPTest.test_bwd_closes_over_tracer: the rule reads y, a
  # symbolic tensor while `outer` is traced.
  outer <- function(y) {
    h <- op_custom_gradient(\(x) tuple(2 * op_sin(x), \(g) 2 * op_cos(y) * g))
    op_grad(h)(op_ones_like(y))
  }
  compiled <- op_compile(outer)
  y <- op_convert_to_tensor(2, "float32")
  got <- suppressMessages(compiled(y), classes = "customgrad_message_fallback")
  expect_tensor(got, 2 * cos(2), tolerance = 1e-6)
  expect_identical(
    untraceable_reads(function(x) x * z),
    "`z`, a tensor of the traced function it was made in,"
  )
  expect_tensor(
    suppressMessages(compiled(y * 2), classes = "customgrad_message_fallback"),
    2 * cos(4),
    tolerance = 1e-6
  )
})

test_that("op_grad() of f reading its own <<- state runs R at every call", {
  skip_if_no_backend()
  step <- 0
  g <- op_grad(function(x) {
    step <<- step + 1
    op_sum(x * min(1, step / 2))
  })
  expect_message(
    expect_tensor(g(c(1, 2)), c(0.5, 0.5)),
    "`step`, a variable it also assigns",
    class = "customgrad_message_fallback"
  )
  expect_tensor(g(c(1, 2)), c(1, 1))
  expect_tensor(g(c(1, 2)), c(1, 1))
  expect_identical(step, 3)
  # A counter it only updates is traced: R runs it once.
  n <- 0
  counted <- op_grad(function(x) {
    n <<- n + 1
    op_sum(x * 3)
  })
  for (i in 1:3) {
    expect_no_message(expect_tensor(counted(c(1, 2)), c(3, 3)))
  }
  expect_identical(n, 1)
})

test_that("a trace that would draw R's random numbers leaves R's draw to the call", {
  skip_if_no_backend()
  set.seed(2)
  want <- stats::runif(1)
  set.seed(2)
  expect_message(
    out <- op_value_and_grad(function(x) op_sum(x * stats::runif(1)))(c(1, 2)),
    class = "customgrad_message_fallback"
  )
  expect_tensor(out$grad, c(want, want), tolerance = 1e-6)
})

test_that("a new handle of the same Python object is no change", {
  skip_if_no_backend()
  w <- op_convert_to_tensor(c(1, 2, 3))
  box <- reticulate::r_to_py(list(w))
  found <- captured_bindings(function(x) x * w)
  w <- reticulate::py_get_item(box, 0L) # another R handle of that tensor
  expect_null(changed_capture(found))
  w <- op_convert_to_tensor(c(1, 2, 3)) # equal values, another tensor
  expect_identical(changed_capture(found), "w")
})

test_that("a changed value read by a function f calls is seen; strict makes it an error", {
  skip_if_no_backend()
  k <- 2
  scaled <- op_custom_gradient(function(x) {
    tuple(x * k, function(upstream) upstream * k)
  })
  g <- op_grad(function(x) op_sum(scaled(x)), trace = "strict")
  expect_tensor(g(c(1, 2)), c(2, 2))
  k <- 5
  expect_snapshot(g(c(1, 2)), error = TRUE)
  expect_error(g(c(1, 2)), class = "customgrad_error_trace")
  lenient <- op_value_and_grad(function(x) op_sum(scaled(x)))
  # Traced anew, lenient() calls scaled(), whose own trace holds k = 2.
  expect_message(
    expect_tensor(lenient(c(1, 2))$grad, c(5, 5)),
    "`scaled()` can't be replayed",
    fixed = TRUE,
    class = "customgrad_message_fallback"
  )
  k <- 7
  expect_message(
    out <- lenient(c(1, 2)),
    "`k`",
    class = "customgrad_message_fallback"
  )
  expect_tensor(out$value, 21)
  expect_tensor(out$grad, c(7, 7))
})

test_that("untraced functions and values passed as arguments are not checked", {
  skip_if_no_backend()
  k <- 2
  g <- op_grad(function(x) op_sum(x * k), trace = FALSE)
  expect_tensor(g(c(1, 2)), c(2, 2))
  k <- 3
  expect_no_message(expect_tensor(g(c(1, 2)), c(3, 3)))
  # k as an argument: new values, one trace, no message.
  runs <- 0
  g2 <- op_grad(function(x, k) {
    runs <<- runs + 1
    op_sum(x * k)
  })
  for (k in c(2, 3, 4)) {
    expect_no_message(expect_tensor(g2(c(1, 2), k), c(k, k)))
  }
  expect_identical(runs, 1)
})

test_that("the fields f reads of a captured R environment are followed", {
  cfg <- new.env()
  cfg$scale <- 2
  cfg$step <- 0 # changed by the loop, not read by f
  cfg$inner <- new.env()
  cfg$inner$shift <- 1
  f <- function(x) x * cfg$scale + cfg$inner[["shift"]] + (cfg$bias %||% 0)
  found <- captured_bindings(f)
  expect_setequal(
    vapply(found, `[[`, "", "name"),
    c("cfg", "cfg$scale", "cfg$inner", "cfg$inner$shift", "cfg$bias")
  )
  expect_null(changed_capture(found))
  cfg$step <- 1
  cfg$scale <- 2 # the same value again
  expect_null(changed_capture(found))
  cfg$scale <- 3
  expect_identical(changed_capture(found), "cfg$scale")
  cfg$scale <- 2
  cfg$inner$shift <- 5
  expect_identical(changed_capture(found), "cfg$inner$shift")
  cfg$inner$shift <- 1
  cfg$bias <- 1 # read as NULL when traced, set now
  expect_identical(changed_capture(found), "cfg$bias")
  rm("bias", envir = cfg)
  expect_null(changed_capture(found))
})

test_that("an R environment f uses otherwise is followed through all its fields", {
  cfg <- new.env()
  cfg$scale <- 2
  cfg$inner <- new.env()
  cfg$inner$back <- cfg # a cycle: each environment followed once
  makeActiveBinding("now", function() stop("an active binding was read"), cfg)
  helper <- function(x, env) x * get("scale", envir = env)
  f <- function(x) helper(x, cfg)
  found <- captured_bindings(f)
  names <- vapply(found, `[[`, "", "name")
  expect_true(all(c("cfg$scale", "cfg$inner", "cfg$inner$back") %in% names))
  expect_false("cfg$now" %in% names) # not read: it runs code
  expect_null(changed_capture(found))
  cfg$scale <- 3
  expect_identical(changed_capture(found), "cfg$scale")
  cfg$scale <- 2
  cfg$added <- 0 # f may read it
  expect_identical(changed_capture(found), "cfg")
  expect_identical(field_paths(quote(cfg[[key]]), "cfg"), NULL)
  expect_identical(
    field_paths(quote(cfg$a + cfg[["b"]]$c), "cfg"),
    list("a", c("b", "c"))
  )
})

test_that("op_grad() of f reading every field of an R environment sees a field added", {
  skip_if_no_backend()
  cfg <- new.env()
  cfg$a <- 1
  cfg$b <- 2
  total <- function(env) Reduce(`+`, mget(ls(env), envir = env))
  g <- op_grad(function(x) op_sum(x * total(cfg)))
  x <- op_convert_to_tensor(c(1, 1))
  expect_tensor(g(x), c(3, 3))
  expect_no_message(expect_tensor(g(x), c(3, 3))) # replayed
  cfg$c <- 4 # no field f read changed, but f reads this one too
  expect_message(
    expect_tensor(g(x), c(7, 7)),
    "`cfg` has changed since",
    class = "customgrad_message_fallback"
  )
})

test_that("Python objects are not followed as fields; the global environment through the fields read", {
  skip_if_no_backend()
  w <- op_convert_to_tensor(c(1, 2))
  where <- globalenv()
  found <- captured_bindings(function(x) x * w + where$nothing)
  expect_setequal(
    vapply(found, `[[`, "", "name"),
    c("w", "where", "where$nothing")
  )
})

test_that("values read through .GlobalEnv, a getter's state and a function in a list are checked", {
  skip_if_no_backend()
  # Each of these replayed the old value, silently.
  assign("cg_test_n", 2, envir = globalenv())
  withr::defer(rm("cg_test_n", envir = globalenv()))
  through_global <- op_grad(function(x) op_sum(x^2 * .GlobalEnv$cg_test_n))
  getter <- local({
    v <- 2
    function(set) {
      if (!missing(set)) {
        v <<- set
      }
      v
    }
  })
  through_getter <- op_grad(function(x) op_sum(x^2 * getter()))
  make <- function() {
    k <- 2
    list(
      set = function(v) k <<- v,
      h = op_custom_gradient(function(x) tuple(x * k, function(u) u * k))
    )
  }
  fns <- make()
  through_list <- op_grad(function(x) op_sum(fns$h(x)))
  for (g in list(through_global, through_getter, through_list)) {
    expect_no_message(g(1))
  }
  assign("cg_test_n", 5, envir = globalenv())
  getter(5)
  fns$set(7)
  changed <- c("reads `.GlobalEnv$cg_test_n`", "reads `v`", "reads `k`")
  expected <- c(10, 10, 7)
  gs <- list(through_global, through_getter, through_list)
  for (i in seq_along(gs)) {
    messages <- fallback_messages(expect_tensor(gs[[i]](1), expected[[i]]))
    expect_match(messages[[1]], changed[[i]], fixed = TRUE)
    # Through the list, fns$h() says so too.
    expect_length(messages, if (i == 3) 2 else 1)
  }
})

test_that("op_grad() of f reading a changed field of an R environment runs R from then on", {
  skip_if_no_backend()
  cfg <- new.env()
  cfg$scale <- 2
  runs <- 0
  g <- op_grad(function(x) {
    runs <<- runs + 1
    op_sum(x * cfg$scale)
  })
  expect_tensor(g(c(1, 2)), c(2, 2))
  expect_no_message(expect_tensor(g(c(1, 2)), c(2, 2)))
  expect_identical(runs, 1)
  cfg$step <- 1 # a field f doesn't read
  expect_no_message(expect_tensor(g(c(1, 2)), c(2, 2)))
  cfg$scale <- 3
  expect_message(
    expect_tensor(g(c(1, 2)), c(3, 3)),
    "`cfg\\$scale` has changed",
    class = "customgrad_message_fallback"
  )
  cfg$scale <- 4
  expect_no_message(expect_tensor(g(c(1, 2)), c(4, 4)))
  expect_identical(runs, 3)
})

test_that("a field read through an object's method (R6's self$field) is seen", {
  skip_if_no_backend()
  # An object as R6 makes them: methods whose environment holds `self`.
  new_schedule <- function(temperature) {
    self <- environment()
    scaled <- function(x) x / self$temperature
    self
  }
  sched <- new_schedule(1)
  soft <- op_custom_gradient(function(x) {
    y <- op_exp(sched$scaled(x))
    tuple(y, function(upstream) upstream * y / sched$temperature)
  })
  g <- op_grad(function(x) op_sum(soft(x)))
  expect_tensor(g(c(0, 1)), exp(c(0, 1)))
  sched$temperature <- 2
  messages <- fallback_messages(
    expect_tensor(g(c(0, 1)), exp(c(0, 1) / 2) / 2)
  )
  # g's message, then soft()'s, which R now runs.
  expect_length(messages, 2)
  expect_match(messages, "`(sched|self)\\$temperature` has changed")
})

test_that("literal_lookups() finds the names get() and getOption() read as written", {
  found <- literal_lookups(quote({
    get("a") + get0(x = "b") + get("a")
    get("c", envir = e) # left to `e`, followed through all its fields
    get("d", inherits = FALSE) # f's own frame
    get(name) # known only when it runs
    getOption("o", 1) * getOption("o")
  }))
  expect_identical(found, list(names = c("a", "b"), options = "o"))
  expect_identical(
    literal_lookups(quote(x + 1)),
    list(names = character(), options = character())
  )
})

test_that("a variable read with get() and an option read with getOption() are checked", {
  local_env <- new.env()
  local(
    {
      w <- 2
      f <- function(x, v) {
        z <- 1
        x * get("w") * get("v") * get("z") * getOption("customgrad.test.scale")
      }
    },
    envir = local_env
  )
  withr::local_options(customgrad.test.scale = 3)
  found <- captured_bindings(local_env$f)
  # `v` (an argument) and `z` (a local) are read in f's own frame.
  expect_setequal(
    vapply(found, `[[`, "", "name"),
    c("w", "getOption(\"customgrad.test.scale\")")
  )
  expect_null(changed_capture(found))
  local_env$w <- 5
  expect_identical(changed_capture(found), "w")
  local_env$w <- 2
  expect_null(changed_capture(found))
  local_env$f2 <- local(
    function(x) x * get0("later", ifnotfound = 1),
    envir = local_env
  )
  found_later <- captured_bindings(local_env$f2)
  expect_null(changed_capture(found_later))
  local_env$later <- 2 # defined after the trace
  expect_identical(changed_capture(found_later), "later")
  options(customgrad.test.scale = 4)
  expect_identical(
    changed_capture(found),
    "getOption(\"customgrad.test.scale\")"
  )
})

test_that("op_grad() of f reading a changed option runs R from then on, with right gradients", {
  skip_if_no_backend()
  withr::local_options(customgrad.test.scale = 2)
  w <- 3
  g <- op_grad(function(x) {
    op_sum(x * get("w") * getOption("customgrad.test.scale"))
  })
  expect_tensor(g(c(1, 2)), c(6, 6))
  expect_no_message(expect_tensor(g(c(1, 2)), c(6, 6)))
  options(customgrad.test.scale = 5)
  expect_message(
    expect_tensor(g(c(1, 2)), c(15, 15)),
    "`getOption\\(\"customgrad.test.scale\"\\)` has changed",
    class = "customgrad_message_fallback"
  )
  w <- 4
  expect_no_message(expect_tensor(g(c(1, 2)), c(20, 20)))
})
