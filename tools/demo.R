# `make demo`: the documentation example of op_custom_gradient(), the naive
# log1pexp (tests/testthat/eager-loop.R), on the backend in KERAS_BACKEND,
# differentiated with that backend's own autodiff as the tests do
# (native_grad(), tests/testthat/helper-gradient.R). The gradient of
# log(1 + exp(x)) at x = 100 must be exactly 1 (the naive formula gives NaN
# there).
library(customgrad)
source("tests/testthat/eager-loop.R")
source("tests/testthat/helper-gradient.R")

g <- as.numeric(native_grad(naive_log1pexp(), 100))
cat(sprintf("%s: d/dx log1pexp(100) = %s\n", config_backend(), format(g)))
if (!identical(g, 1)) {
  quit(status = 1)
}
