# Memory bounds that depend on when R's collector frees what a collection
# released (its generations): run by `make soak`, not `make test`.

test_that("without Linux's probes, with or without a device count, a loop's live gradients stay bounded", {
  skip_if_no_backend()
  source(test_path("..", "testthat", "eager-loop.R"), local = TRUE)
  f <- naive_log1pexp()
  x <- op_ones(1e5) * 0.5 # 400 kB a tensor
  for (device in c(FALSE, TRUE)) {
    fake <- fake_device()
    without_linux_probes(threshold_mb = 2, device = if (device) fake$reader, {
      step <- eager_step(f, x, "native")
      for (i in 1:150) {
        # The gradients the backend hands to R: customgrad never sees them.
        g <- fake$track(step())
      }
    })
    peak <- reticulate::py_to_r(fake$peak) / 4e5
    # Held without a collection: all 150. A collection is due every 5
    # steps (2 MB handed to R, or counted on the device); each keeps the
    # step that runs it, until R's own collection of older generations.
    expect_lte(peak, 50)
    expect_gte(peak, 5)
  }
})
