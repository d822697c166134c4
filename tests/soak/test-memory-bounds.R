# Memory bounds that depend on when R's collector frees what a collection
# released (its generations): run by `make soak`, not `make test`.

test_that("without Linux's probes, with or without a device count, a loop's live gradients stay bounded", {
  skip_if_no_backend()
  for (device in c(FALSE, TRUE)) {
    peak <- fake_device_loop(device)$peak
    # Held without a collection: all 150. A collection is due every 5
    # steps (2 MB handed to R, or counted on the device); each keeps the
    # step that runs it, until R's own collection of older generations.
    expect_lte(peak, 50)
    expect_gte(peak, 5)
  }
})
