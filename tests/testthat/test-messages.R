test_that("Python reads R's forward reply by name", {
  skip_if_no_backend()
  customgrad:::customgrad_py()
  messages <- reticulate::import("customgrad._messages")
  read <- messages$read_forward_reply(customgrad:::forward_reply("v", 7))
  expect_identical(read$value, "v")
  expect_identical(read$grad, 7)
  expect_error(messages$read_forward_reply(list("v", 7)), "forward_reply")
})
