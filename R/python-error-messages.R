# The message R writes for each error class customgrad's Python module
# raises, from the fields its exception carries; and the messages Python
# writes (errors.WrittenInPython: loading a saved model, where R may not
# be), shown as they are.

# The message for an error customgrad's Python module raised, from its
# class and details (`d` in the templates).
python_error_message <- function(class, d) {
  switch(
    class,
    grad_count = c(
      if (identical(d$expected, d$tensors)) {
        "The gradient function must return {d$tensors} gradient{?s}, one per tensor input of {.arg f}."
      } else {
        "The gradient function must return {d$tensors} gradient{?s}, one per tensor input of {.arg f}, or {d$expected}, one per argument passed."
      },
      "x" = "It returned {d$returned}.",
      "i" = if (identical(d$expected, d$tensors)) {
        "Return a list with one gradient per input, {.code NULL} for an input without one."
      } else {
        "Return a list with one gradient per tensor input, or one per argument passed with {.code NULL} for options."
      }
    ),
    grad_shape = c(
      "Each gradient must have its input's shape.",
      "x" = "The gradient for {d$where} has shape {d$grad_shape}; the input has shape {d$input_shape}.",
      "i" = "Reduce or broadcast the gradient to the input's shape (with {.fn op_sum} over broadcast axes, say)."
    ),
    grad_structure = if (identical(d$problem, "static")) {
      c(
        "Input {d$input} of {.arg f} is not a tensor, so it has no gradient.",
        "x" = "The gradient function returned one for it.",
        "i" = "Return {.code NULL} in its place."
      )
    } else {
      c(
        "The gradient for input {d$input} must be nested like the input.",
        "x" = "The input holds {d$n_tensors} tensor{?s}, and its gradient is nested otherwise.",
        "i" = "Return a list with the input's nesting and names."
      )
    },
    grad_dtype = c(
      "Each gradient must be floating point, like its input.",
      "x" = "The gradient for {d$where} has dtype {.val {d$dtype}}; the input has dtype {.val {d$input_dtype}}.",
      "i" = "Return a floating-point tensor (R numbers, {.code op_cast(g, \"{d$input_dtype}\")}), or {.code NULL} for no gradient."
    ),
    grad_variables = c(
      "The gradient function must return {d$expected} variable gradient{?s}, one per TensorFlow variable {.arg f} read.",
      "x" = "It returned {d$returned}.",
      "i" = "Return {.code list(input_gradients, variable_gradients)}."
    ),
    not_serializable = c(
      if (is.null(d$layer)) {
        "Keras can't save the custom-gradient function in this model."
      } else {
        "Keras can't save the custom-gradient function in the {.code Lambda} layer {.val {d$layer}}."
      },
      "x" = "The model would save, but not load: Keras saves the function by a name that {.fn load_model} can't find it by.",
      "i" = if (is.null(d$layer)) {
        "Make a layer of it with {.fn layer_custom_gradient}: it saves and reloads with the model."
      } else {
        "Make the layer with {.fn layer_custom_gradient} instead of {.fn layer_lambda}: it saves and reloads with the model."
      },
      "i" = docs_hint(
        "troubleshooting",
        "A model that won't reload",
        topic = "layer_custom_gradient"
      )
    ),
    thread = if (!is.null(d$host)) {
      c(
        "R can't run a custom-gradient function inside this compiled computation.",
        "x" = if (identical(d$host, "staged")) {
          "TensorFlow would run R's host callback on a thread of its own while R's main thread waits for the graph, and R runs only on the main thread; a graph exported ({.code model$export()}, a SavedModel) can't hold R at all."
        } else if (identical(d$host, "xla")) {
          "XLA compiles this computation ({.code jit_compile = TRUE}), and XLA can't hold a host callback."
        } else if (identical(d$host, "exported")) {
          "It is being exported ({.code model$export()}, {.code jax.export}) to run where R is not, and an exported computation can't call R."
        } else {
          "The backend ran R's host callback on the thread {.val {d$thread}} while R's main thread waited for the computation, and R runs only on the main thread."
        },
        "i" = if (identical(d$host, "xla")) {
          "Compile without XLA: {.code jit_compile = FALSE} in {.fn compile} or {.code tf$`function`()}."
        } else {
          "Compile with {.fn op_compile} (which serves R while the computation runs) rather than {.code tf$`function`()}; for {.fn fit}, {.fn evaluate} and {.fn predict} on TensorFlow, pass the model to {.fn serve_host_ops} first (or compile it with {.code run_eagerly = TRUE})."
        },
        "i" = "A model that computes in R runs only where R does: save it with {.fn save_model} and load it in R, rather than export it."
      )
    } else {
      c(
        "A custom-gradient function was called on the Python thread {.val {d$thread}}.",
        "x" = "R runs only on the main thread.",
        "i" = "Call it eagerly or inside a compiled function traced on the main thread, not from {.code tf.py_function}, a {.code tf.data} map or another thread."
      )
    },
    value_like = switch(
      d$problem,
      missing = c(
        "A custom-gradient function that R runs at every call needs {.arg value_like} inside a compiled computation.",
        "x" = "It could not be traced, and R could not run it on the backend's symbolic tensors, which have no values yet (the backend's own error is the condition's field {.field details$reason}).",
        "i" = "With {.arg value_like}, R runs it on the values in a host callback; the backend must know the shape and dtype of its value before R runs.",
        "i" = "Give {.code op_custom_gradient(f, value_like = \"x\")} for a value shaped like input {.arg x}, or a function of the inputs that returns a tensor shaped like the value ({.code value_like = \\(x) op_sum(x)})."
      ),
      not_tensor = c(
        "{.arg value_like} must give tensors shaped like {.arg f}'s value.",
        "x" = "Element {d$leaf} of what it gave is not a tensor."
      ),
      nesting = c(
        "{.arg f}'s value must be nested as {.arg value_like} says.",
        "x" = "{.arg value_like} gives {d$expected} tensor{?s}; {.arg f} returned {d$returned}."
      ),
      shape = c(
        "{.arg f}'s value must have the shape {.arg value_like} gives.",
        "x" = "Tensor {d$leaf} of the value has shape {d$shape}; {.arg value_like} gives {d$declared}.",
        "i" = "Fix {.arg value_like}, or the value's shape."
      ),
      dtype = c(
        "{.arg f}'s value must have the kind of dtype {.arg value_like} gives.",
        "x" = "Tensor {d$leaf} of the value has dtype {.val {d$dtype}}; {.arg value_like} gives {.val {d$declared}}."
      ),
      c(
        "The gradient of an R host op was needed after it was dropped.",
        "x" = "Only the {d$kept} newest forward calls keep their gradient function until their backward pass."
      )
    ),
    recursion = c(
      "Custom-gradient functions can't be nested {d$depth} levels deep.",
      "x" = if (is.null(d$python_limit)) {
        "The limit is {d$limit} levels: a function that calls itself without end?"
      } else {
        "Python's recursion limit ({d$python_limit} frames) is nearly reached: a function that calls itself without end?"
      },
      "i" = "Stop the recursion with a condition that R decides, such as a depth counter."
    ),
    transform = switch(
      d$kind,
      forward = c(
        "A custom gradient can't be used in forward mode ({d$transform}).",
        "x" = "Its rule gives vector-Jacobian products (reverse mode); a Jacobian-vector product would ignore it.",
        "i" = "Differentiate in reverse mode: {.fn op_grad}, {d$reverse}."
      ),
      pfor = c(
        "TensorFlow's {.code vectorized_map()} can't use a custom gradient.",
        "x" = "Its vectorised graph differentiates the forward operations and drops the custom rule.",
        "i" = "Map with {.fn op_map} (a loop that keeps the rule), or use the JAX or PyTorch backend, whose {.code vmap} keeps it."
      ),
      c(
        "A custom-gradient function that R runs at every call can't be batched by {d$transform}.",
        "x" = "It could not be traced, so R would run on the transform's tensors.",
        "i" = "Give it {.arg value_like} ({.code op_custom_gradient(f, value_like = \"x\")}), so that R runs once per element in a host callback, compute with tensor operations only so that it traces, or map with {.fn op_map}."
      )
    ),
    trace = c(
      "{.arg f} can't be traced, and tracing is strict.",
      "x" = "{d$reason}",
      "i" = "Compute with tensor operations only (no tensor values read in R, no R random numbers), or use {.code trace = TRUE} to let R run it at every call."
    ),
    not_scalar = c(
      "{.arg f} must return a scalar when {.arg upstream} is {.code NULL}.",
      "x" = "It returned {length(d$shapes)} tensor{?s} of shape{?s} {d$shapes}.",
      "i" = "Reduce the value to one number (with {.fn op_sum}, say), or give {.arg upstream} for a vector-Jacobian product."
    ),
    upstream = if (identical(d$problem, "shape")) {
      c(
        "{.arg upstream} must have the shape of {.arg f}'s value.",
        "x" = "{.arg upstream}{if (is.null(d$tensor)) '' else paste0(' (tensor ', d$tensor, ')')} has shape {d$upstream_shape}; the value has shape {d$value_shape}."
      )
    } else {
      c(
        "{.arg upstream} must be nested like {.arg f}'s value.",
        "x" = "The value holds {d$n_values} tensor{?s}; {.arg upstream} holds {d$n_upstream}, or is nested otherwise."
      )
    },
    input = c(
      "A {d$framework} tensor can't be passed while Keras runs with {.val {d$backend}}.",
      "x" = "It is a {.cls {d$tensor}}.",
      "i" = "Pass a tensor of the active backend, or R values (convert it with {.code as.array()} first)."
    ),
    wrt_dtype = c(
      "Can't differentiate with respect to argument {d$argument}.",
      "x" = "It has dtype {.val {d$dtype}}; gradients need a floating-point dtype.",
      "i" = "Convert it first, with {.code op_cast(x, \"float32\")}, or leave it out of {.arg wrt}."
    ),
    backend_unsupported = c(
      "customgrad does not support the Keras backend {.val {d$backend}}.",
      "i" = "Restart R and choose {.val tensorflow}, {.val jax} or {.val torch} with {.fn keras3::use_backend} before Keras starts."
    ),
    gradcheck_structure = c(
      "{.arg f} must return the same number of tensors for every input.",
      "x" = "It returned {d$expected} at first and {d$returned} for perturbed inputs."
    ),
    weights_lost = c(
      "This model has lost its weights.",
      "x" = "An error stopped its compiled step on JAX, and Keras had handed the model's weights to that step, which used their memory.",
      "i" = "Load the model or its weights again ({.fn load_model}, {.fn load_model_weights}), or build it again."
    ),
    internal = c(
      "customgrad failed inside: {d$problem}",
      "i" = "This is a bug in customgrad; please report it with the code that led here."
    )
  )
}

# The bullets Python wrote for `found` (an errors.WrittenInPython), as cli's
# bullets, their braces literal.
python_written_message <- function(found) {
  bullets <- reticulate::py_to_r(found$bullets())
  marks <- vapply(bullets, function(b) b[[1]], "")
  texts <- vapply(bullets, function(b) gsub("([{}])", "\\1\\1", b[[2]]), "")
  stats::setNames(texts, marks)
}
