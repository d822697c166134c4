library(testthat)
library(customgrad)

test_check("customgrad")
