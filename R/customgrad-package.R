#' customgrad: custom gradients for Keras 3 on every backend
#'
#' Write a custom gradient once, in R, with [op_custom_gradient()], and use
#' it on the TensorFlow, JAX and PyTorch backends of Keras 3.
#' `vignette("troubleshooting")` gathers the common errors, what they mean
#' and how to fix them; [customgrad_errors] lists every error class.
#'
#' @section Built on keras3:
#' `library(customgrad)` attaches keras3: its `op_*()` functions, `tuple()`,
#' [keras3::use_backend()], [keras3::config_backend()], models and layers are
#' the ones to use with customgrad, which adds what keras3 lacks: a custom
#' gradient that works alike on every backend ([op_custom_gradient()], which
#' masks keras3's), gradients and checks from R ([op_grad()],
#' [gradcheck()], [op_compile()]), the ready-made gradient ops and their
#' layers, and R methods for JAX and PyTorch tensors (TensorFlow tensors
#' keep the tensorflow package's). A function of `keras.ops` that keras3 has
#' no wrapper for yet is reached through keras3's handle on the module:
#' `keras$ops$nansum(x)`.
#'
#' customgrad and keras3 use one Python per session, keras3's: customgrad
#' names no Python of its own. That is `RETICULATE_PYTHON`, a
#' `reticulate::use_virtualenv()` call or an activated virtual environment
#' if there is one, else keras3's `r-keras` ([keras3::install_keras()]).
#' With none of them, reticulate provisions a Python with `uv` for what
#' keras3 and customgrad declare with [reticulate::py_require()]
#' (customgrad: `keras`, and Python `r python_requirements()$python` or
#' newer), the same whichever package starts Python first; when it can't
#' (offline), the error says how else to get one. [customgrad_config()]
#' says which Python is used, why, and the devices each backend sees.
#'
#' @section How it is built:
#' R code knows R: it reads the gradient function's arguments, calls it the
#' way it asks, and turns failures into classed R conditions. The Python
#' module in `inst/python/customgrad` knows the backends: one adapter per
#' backend (`tf.custom_gradient`, `jax.custom_gradient`, and the package's
#' own `torch.autograd.Function`), all behind one interface. For each new
#' input signature, R runs `f` and `grad` once on Keras symbolic tensors;
#' Python compiles the Keras operations they recorded into two flat lists
#' of backend calls (forward, and backward from the upstream gradient) and
#' runs those for every later call with that signature, so that R runs only
#' while tracing (see "When R runs" in [op_custom_gradient()]). A function
#' that can't be traced calls R's `f` in the forward pass and `grad` in the
#' backward pass. Either way the gradients are checked before the backend
#' sees them.
#'
#' Why Keras symbolic tensors: every way R reaches a tensor operation
#' (keras3's `op_*()`, R arithmetic, methods of tensorflow R, keras3 and
#' customgrad, another custom-gradient function) ends in a `keras.ops`
#' function, which records a node on a `KerasTensor`. So the recording sees
#' all `f` does, alike on the three backends, without customgrad wrapping an
#' R function. What it can't hold shows up as an error on symbolic tensors
#' and makes that signature call R. Replay is a loop over the recorded
#' operations, each run as `keras.ops` runs it eagerly.
#' [op_grad()] and [op_compile()] trace their `f` the same way, without a
#' `grad`, and run the replay under the backend's autodiff or compiler.
#'
#' @section Memory:
#' R releases a tensor only when its garbage collector runs, and R does not
#' know a tensor's size. So customgrad runs a minor `gc()` (a few ms) once
#' the tensors it handed to R, or the memory the backend counts on its
#' device, grew by `getOption("customgrad.gc_threshold_mb", 64)` megabytes
#' since the last collection (R's own collections take what a minor one
#' keeps). It runs them where R holds nothing of the step in progress (a
#' custom gradient's rule in the backward pass, the start of the next
#' call). The device's count is the backend's (TensorFlow's and PyTorch's
#' allocators on a GPU, JAX's on every device); on a CPU, where TensorFlow
#' and PyTorch count nothing, glibc's stands in on Linux and the bytes
#' handed to R bound the rest elsewhere. A lower threshold holds less and
#' costs time: a PyTorch `op_grad()` loop at 1e6 elements peaked 72-80 /
#' 84-91 / 129-137 MB above its start with 16 / 32 / 64 MB, at 7.1 /
#' 5.5-6.4 / 5.2-5.5 ms a step. Set the option before the first customgrad
#' call.
#'
#' A custom-gradient function holds what its `f` captured until R's
#' collector releases the function, with its Python callable and traces; a
#' copy handed to Python (a Keras layer, `jax$grad(h)`) keeps them as long
#' as Python keeps it.
#'
#' @section Beyond one process:
#' Custom-gradient functions and layers train under Keras' distribution
#' API across processes (JAX) and under TensorFlow's `MirroredStrategy`
#' across devices: R traces once, on the main thread, and every replica
#' replays the trace. [use_distributed()] arranges the processes and
#' devices before the backend starts; `vignette("training")`, "When one
#' machine is not enough", has the recipe.
#'
#' @section What customgrad changes in the process:
#' Nothing in the R or Python process is changed by loading customgrad,
#' except as follows, each for the reason given:
#' * Once Keras is imported, reticulate's [reticulate::py_register_load_hook()]
#'   imports customgrad's layer module and registers its layer class with
#'   Keras, so that `load_model()` finds saved custom-gradient layers in a
#'   fresh session. No import hook of customgrad's own is installed.
#' * While a backend runs R code (a custom gradient's `f` or `grad` called
#'   from Python), R's interrupts and time limits are held, by setting R's
#'   own `R_interrupts_suspended` flag as [suspendInterrupts()] does, and
#'   raised when the R code returns. Without it, an interrupt taken while
#'   reticulate's C++ runs R skips the release of Python's lock: the
#'   session hangs or crashes (the interrupt and `setTimeLimit()` tests in
#'   the package's `tests/soak`, run by `make soak`, show it). A thread
#'   lets the hold go if the R code runs longer than half a second, so that
#'   Esc or Ctrl+C stops a long `grad` as anywhere else in R. The thread
#'   runs only while R code is called from a backend. Python finds the
#'   flag among the symbols the R process exports (Linux, macOS), or else
#'   in R's own library (`R.dll` on Windows, `libR.so` or `libR.dylib`);
#'   where neither has it, nothing is held, and R takes interrupts there as
#'   it would without customgrad.
#' * `options(customgrad.freeze_imports = TRUE)` (off by default) freezes
#'   Python's objects out of its cyclic collector: see "Options".
#' * [use_distributed()] sets up the processes and devices it is asked
#'   for before the backend starts, with an import hook for the backend's
#'   module; nothing of it happens unless it is called.
#' TensorFlow's start-up lines are printed as TensorFlow prints them; set
#' the environment variable `TF_CPP_MIN_LOG_LEVEL` to `"2"` before Python
#' starts to hide them, as for any keras3 session.
#'
#' @section Options:
#' * `customgrad.gc_threshold_mb`: see "Memory" above.
#' * `customgrad.freeze_imports`: `TRUE` (set before Keras is imported)
#'   freezes what Python holds once Keras is imported out of its cyclic
#'   collector (`gc.freeze()`): in eager loops from R on PyTorch at n = 1 it
#'   took Python's collector from ~15 us of each call to ~3 us. Off by
#'   default: it changes the whole process (frozen objects are never freed).
#' * `customgrad.max_traces`: the most traces one custom-gradient function
#'   keeps (default 32); see "When R runs" in [op_custom_gradient()].
#' * `customgrad.print_max`: the most elements a JAX or PyTorch tensor
#'   prints in full (default 200), when they fit in 20 lines; larger
#'   tensors print their corners. TensorFlow tensors print as the
#'   tensorflow package prints them.
#'
#' @keywords internal
"_PACKAGE"

## usethis namespace: start
#' @import keras3
# tensorflow R is imported so that its namespace, with its methods for
# TensorFlow tensors, loads before customgrad's .onLoad:
# register_tensor_methods() sees those methods and keeps them.
#' @importFrom tensorflow tf_version
## usethis namespace: end
NULL

# The state object that op_custom_gradient() puts into each function it makes.
utils::globalVariables(".customgrad_state")
