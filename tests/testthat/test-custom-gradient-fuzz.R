# Randomised inputs at the boundary: shapes (scalars, empty tensors, rank
# 0-4), dtypes and nesting, with a fixed seed and a recorded count. Each
# case compares customgrad's gradient of f = 3 x^2 + sin(x), written with a
# custom gradient, with the backend's own autodiff of the same formula,
# traced and untraced.

fuzz_seed <- 20261124
fuzz_cases <- 40

# Relative tolerance of a gradient computed in `dtype`.
fuzz_tolerance <- c(
  float16 = 2e-2,
  bfloat16 = 6e-2,
  float32 = 1e-5,
  float64 = 1e-5 # float32 on JAX without x64
)

random_shape <- function() {
  rank <- sample(0:4, 1)
  # 0 makes an empty tensor, about one case in five.
  as.integer(sample(c(0, 1, 2, 3), rank, replace = TRUE, prob = c(1, 2, 2, 1)))
}

random_tensor <- function(shape, dtype) {
  values <- stats::runif(prod(shape), -2, 2)
  if (dtype == "int32") {
    values <- round(values)
  }
  x <- if (length(shape) == 0) values else array(values, dim = shape)
  op_convert_to_tensor(x, dtype)
}

# A tensor's values as float64 R values (bfloat16 and float16 cast first:
# R has no such types).
as_values <- function(x) {
  as.array(op_cast(x, "float32"))
}

new_fuzzed <- function(trace) {
  op_custom_gradient(
    function(x) {
      tuple(3 * x * x + sin(x), \(upstream) upstream * (6 * x + cos(x)))
    },
    trace = trace
  )
}

test_that("fuzz: gradients match autodiff over shapes and dtypes, traced and not", {
  skip_if_no_backend()
  withr::local_seed(fuzz_seed)
  traced <- new_fuzzed(TRUE)
  untraced <- new_fuzzed(FALSE)
  plain <- function(x) 3 * x * x + sin(x)
  checked <- c(compared = 0, refused = 0)
  for (i in seq_len(fuzz_cases)) {
    shape <- random_shape()
    dtype <- sample(c(names(fuzz_tolerance), "int32"), 1)
    x <- random_tensor(shape, dtype)
    label <- sprintf("case %d: shape (%s), %s", i, toString(shape), dtype)
    if (dtype == "int32") {
      expect_error(
        op_grad(\(x) op_sum(traced(x)))(x),
        class = "customgrad_error_wrt_dtype",
        label = label
      )
      checked[["refused"]] <- checked[["refused"]] + 1
      next
    }
    expected <- as_values(op_grad(\(x) op_sum(plain(x)))(x))
    for (h in list(traced, untraced)) {
      value <- h(x)
      expect_identical(
        as.integer(unlist(op_shape(value))),
        shape,
        label = label
      )
      grad <- op_grad(\(x) op_sum(h(x)))(x)
      expect_identical(as.integer(unlist(op_shape(grad))), shape, label = label)
      expect_equal(
        as_values(grad),
        expected,
        tolerance = fuzz_tolerance[[dtype]],
        label = label
      )
    }
    checked[["compared"]] <- checked[["compared"]] + 1
  }
  # The record: every case ran (seed 20261124).
  expect_identical(sum(checked), fuzz_cases)
  expect_gt(checked[["compared"]], fuzz_cases / 2)
})

test_that("fuzz: nested inputs and outputs get gradients of their nesting", {
  skip_if_no_backend()
  withr::local_seed(fuzz_seed + 1)
  # Two inputs, one of them a named list of two; two outputs, nested.
  nested <- op_custom_gradient(function(x, ys) {
    value <- list(sum = x + ys$a * ys$b, pair = list(sin(x), ys$b * 2))
    tuple(value, function(upstream) {
      list(
        upstream$sum + upstream$pair[[1]] * cos(x),
        list(
          a = upstream$sum * ys$b,
          b = upstream$sum * ys$a + upstream$pair[[2]] * 2
        )
      )
    })
  })
  plain <- function(x, ys) {
    list(sum = x + ys$a * ys$b, pair = list(sin(x), ys$b * 2))
  }
  loss <- function(f) {
    function(x, ys) {
      v <- f(x, ys)
      op_sum(v$sum) + op_sum(v$pair[[1]]) + op_sum(v$pair[[2]])
    }
  }
  for (i in 1:8) {
    shape <- random_shape()
    x <- random_tensor(shape, "float32")
    ys <- list(
      a = random_tensor(shape, "float32"),
      b = random_tensor(shape, "float32")
    )
    got <- op_grad(loss(nested), wrt = 1:2)(x, ys)
    want <- op_grad(loss(plain), wrt = 1:2)(x, ys)
    expect_named(got[[2]], c("a", "b"))
    expect_equal(as_values(got[[1]]), as_values(want[[1]]), tolerance = 1e-5)
    expect_equal(
      as_values(got[[2]]$a),
      as_values(want[[2]]$a),
      tolerance = 1e-5
    )
    expect_equal(
      as_values(got[[2]]$b),
      as_values(want[[2]]$b),
      tolerance = 1e-5
    )
  }
})
