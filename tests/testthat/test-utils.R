test_that("%||% falls back only on NULL", {
  expect_identical(NULL %||% 2, 2)
  expect_identical(1 %||% 2, 1)
  expect_identical(FALSE %||% 2, FALSE)
})
