#' @keywords internal
"_PACKAGE"

## usethis namespace: start
## usethis namespace: end
NULL

# The state object that op_custom_gradient() puts into each function it makes.
utils::globalVariables(".customgrad_state")
