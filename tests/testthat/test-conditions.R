# Every customgrad error class: declared in the one table, and its message
# (snapshot), raised the way a user meets it where that is practical.

test_that("every error class is declared once and has a trigger here", {
  skip_if_no_backend()
  declared <- names(customgrad:::error_classes)
  expect_false(anyDuplicated(declared) > 0)
  expect_setequal(names(error_triggers), declared)
  python <- customgrad:::customgrad_py("errors")$error_classes()
  expect_true(all(sub("^customgrad_error_", "", python) %in% declared))
})

test_that("an undeclared error class is a bug, not a message", {
  expect_error(
    customgrad:::abort_customgrad("x", class = "no_such_class"),
    "Undeclared customgrad error class"
  )
})

for (class in names(error_triggers)) {
  test_that(paste0("customgrad_error_", class, " says what and what to do"), {
    skip_if_no_backend()
    trigger <- error_triggers[[class]]
    err <- expect_error(trigger(), class = paste0("customgrad_error_", class))
    expect_s3_class(err, "customgrad_error")
    expect_snapshot(
      trigger(),
      error = TRUE,
      transform = scrub_python_path,
      variant = snapshot_variant(class)
    )
  })
}
