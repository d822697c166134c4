# R values a traced function reads from outside its arguments.
#
# A trace fixes them: the replay holds the tensors and numbers `f` read
# from its environment when it was traced. Called from R, a traced
# op_grad() or custom-gradient function checks before each call that the
# variables `f` reads from its environment (and from the environments of
# the R functions it calls) are still bound to the values the trace held;
# where one changed, R runs `f` at every call from then on, after a
# message, rather than replay old values.

# The bindings `f` reads from outside: a list of `list(name, key, env,
# value)` (NULL for none): `name` as the user reads it (`cfg$lr`), `key`
# the binding's name in `env`. Found in environments that are neither
# package namespaces nor attached packages (the global environment and
# closures' frames). Functions found there are followed, and those among
# the elements the code reads of a list (`fns$h`): the variables they read
# count too, even those they also assign with `<<-` (a getter's state),
# as do those of the functions customgrad's transforms wrap; the
# variables a traced function itself assigns with `<<-` are its own state
# (a counter), not read values. R environments found there (`cfg`, an R6
# object's `self`) are followed through the fields the code reads
# (`cfg$lr`, `cfg[["lr"]]`), which R changes in place; an environment the
# code uses otherwise (passes on, `get()`s from) through all its fields,
# and their number (`size`), so that a field added is seen too. The
# global environment is followed through the fields read (`.GlobalEnv$n`)
# alone. Variables and options looked up by a name written in the code
# (`get("w")`, `getOption("x")`) count as well.
#
# Also found: what `f` reads that no check can see (opaque_call(), and a
# variable of its own that it assigns with `<<-` and reads besides), as
# the attribute "opaque": such an `f` is not traced (untraceable_reads()).
captured_bindings <- function(f) {
  found <- list()
  seen <- list()
  opaque <- character()
  # `own`: a traced function, whose `<<-` targets are its own state.
  visit <- function(fn, own = FALSE) {
    if (seen_before(fn)) {
      return()
    }
    opaque <<- c(opaque, opaque_function(fn)) # (f, or one it calls, is one)
    inner <- environment(fn)$.customgrad_state$f
    if (is.function(inner)) {
      # a transform: what counts is the function it wraps
      return(visit(inner, own = TRUE))
    }
    env <- environment(fn)
    if (is.null(env) || is_package_env(env)) {
      return()
    }
    code <- code_reads(fn)
    assigned <- if (own) code$superassigned else character()
    read <- code$read_beside_update[assigned]
    opaque <<- c(
      opaque,
      sprintf("`%s`, a variable it also assigns with `<<-`,", assigned[read])
    )
    for (name in setdiff(code$globals, assigned)) {
      where <- binding_env(name, env)
      # (base's `.GlobalEnv` is the global environment: its fields count.)
      if (is.null(where) || (is_package_env(where) && name != ".GlobalEnv")) {
        opaque <<- c(opaque, opaque_call(name, where))
        next
      }
      value <- get(name, envir = where, inherits = FALSE)
      record(name, name, where, value, code$field_paths[[name]])
    }
    lookups <- code$lookups
    for (name in setdiff(lookups$names, c(code$locals, assigned))) {
      where <- binding_env(name, env)
      if (is.null(where)) {
        # `get0("w")` of a `w` defined later: seen where f would find it.
        add(list(name = name, key = name, env = env, absent = TRUE))
      } else if (!is_package_env(where)) {
        value <- get(name, envir = where, inherits = FALSE)
        record(name, name, where, value, NULL)
      }
    }
    for (option in lookups$options) {
      add(list(
        name = sprintf("getOption(\"%s\")", option),
        option = option,
        value = getOption(option)
      ))
    }
  }
  # `paths`: the fields read of `value`, if an environment (NULL: all).
  record <- function(name, key, env, value, paths) {
    if (is_traced_tensor(value)) {
      # A function made inside a traced one, reading that one's tensor: a
      # replay would compute with the tensor of the trace it was made in.
      opaque <<- c(
        opaque,
        sprintf(
          "`%s`, a tensor of the traced function it was made in,",
          name
        )
      )
    }
    add(list(name = name, key = key, env = env, value = value))
    if (is.function(value)) {
      return(visit(value))
    }
    if (is.list(value) && !is.object(value)) {
      read <- if (is.null(paths)) {
        seq_along(value)
      } else {
        intersect(first_fields(paths), names(value))
      }
      for (element in read) {
        if (is.function(value[[element]])) visit(value[[element]])
      }
      return()
    }
    global <- identical(value, globalenv()) && !is.null(paths)
    if (!is_field_env(value) && !global) {
      return()
    }
    if (is.null(paths)) {
      if (seen_before(value)) {
        return() # all its fields are followed already (or a cycle)
      }
      add(list(name = name, env = value, size = length(value)))
      fields <- ls(value, all.names = TRUE, sorted = FALSE)
    } else {
      fields <- first_fields(paths)
    }
    for (field in fields) {
      field_name <- paste0(name, "$", field)
      if (!exists(field, envir = value, inherits = FALSE)) {
        add(list(name = field_name, key = field, env = value, absent = TRUE))
      } else if (!bindingIsActive(field, value)) {
        # (An active binding runs code when read: not read here.)
        rest <- if (!is.null(paths)) {
          deeper <- Filter(\(p) identical(p[[1]], field), paths)
          if (any(lengths(deeper) == 1L)) NULL else lapply(deeper, `[`, -1L)
        }
        field_value <- get(field, envir = value, inherits = FALSE)
        record(field_name, field, value, field_value, rest)
      }
    }
  }
  add <- function(binding) {
    found[[length(found) + 1L]] <<- binding
  }
  seen_before <- function(x) {
    if (any(vapply(seen, identical, logical(1), x))) {
      return(TRUE)
    }
    seen[[length(seen) + 1L]] <<- x
    FALSE
  }
  first_fields <- function(paths) unique(vapply(paths, `[[`, "", 1L))
  if (is.function(f)) {
    visit(f, own = TRUE)
  }
  if (length(found) || length(opaque)) {
    structure(found, check = capture_check(found), opaque = unique(opaque))
  } # NULL: nothing to check at each call
}

# What captured_bindings() reads of a function's code, which depends on
# the code alone: the variables it reads from outside (`globals`), with the
# fields it reads of each (`field_paths`, field_paths()); the targets of its
# `<<-` (`superassigned`) and, for each, whether the code also reads it;
# what it looks up by a written name (`lookups`); its formals and local
# variables (`locals`). Reading the code is most of a trace's cost in R
# (codetools' walk, about 2 ms a function, at every trace of every
# function a traced one reaches), so it is kept per code, in the hash
# table `the$code_reads` (keyed by the body and formals, compared with
# identical()). codetools reads a few base functions specially (`quote()`,
# `local()`, `with()`) unless the function's environment defines its own
# of that name: the same code with and without such a mask is assumed not
# to meet.
code_reads <- function(fn) {
  body <- body(fn)
  formals <- formals(fn)
  key <- list(body, formals)
  kept <- utils::gethash(the$code_reads, key)
  if (!is.null(kept)) {
    return(kept)
  }
  # findGlobals() reads the code without running it (codetools ships with
  # R); its warnings about the code are not the user's concern here, and a
  # function it can't read adds nothing.
  globals <- tryCatch(
    suppressWarnings(codetools::findGlobals(fn)),
    error = function(e) NULL
  )
  superassigned <- superassigned(body)
  reads <- list(
    globals = globals,
    field_paths = sapply(
      globals,
      function(name) field_paths(body, name),
      simplify = FALSE
    ),
    superassigned = superassigned,
    read_beside_update = vapply(
      superassigned,
      read_beside_update,
      NA,
      code = body
    ),
    lookups = literal_lookups(body),
    locals = c(names(formals), local_names(fn))
  )
  if (utils::numhash(the$code_reads) >= max_code_reads) {
    utils::clrhash(the$code_reads) # (code made at run time)
  }
  utils::sethash(the$code_reads, key, reads)
  reads
}

# The most functions' code code_reads() keeps.
max_code_reads <- 2000L

# What `f` reads that a trace would fix and no check before a call can
# see (see captured_bindings()): a character vector, empty if nothing.
untraceable_reads <- function(f) {
  if (!is.function(f)) {
    return(character())
  }
  as.character(attr(captured_bindings(f), "opaque"))
}

# `f` itself as one of opaque_functions, described; else NULL.
opaque_function <- function(f) {
  for (pkg in names(opaque_functions)) {
    for (name in names(opaque_functions[[pkg]])) {
      if (is_namespace_function(f, pkg, name)) {
        return(opaque_call(name, asNamespace(pkg)))
      }
    }
  }
  NULL
}

is_namespace_function <- function(f, pkg, name) {
  requireNamespace(pkg, quietly = TRUE) &&
    identical(f, getExportedValue(pkg, name))
}

# Functions whose result a trace would fix, by the package that has them,
# with what they read: the clock, the environment, files and connections,
# and keras3's op_is_tensor(), FALSE for the symbolic tensors R traces with
# (an `if` on it would take the other branch).
opaque_functions <- list(
  base = c(
    Sys.time = "the clock",
    Sys.Date = "the clock",
    date = "the clock",
    proc.time = "the clock",
    Sys.getenv = "an environment variable",
    readLines = "a file or connection",
    readRDS = "a file or connection",
    readline = "a file or connection",
    scan = "a file or connection",
    load = "a file or connection",
    file.exists = "a file or connection"
  ),
  utils = c(
    read.table = "a file or connection",
    read.csv = "a file or connection"
  ),
  keras3 = c(
    op_is_tensor = "whether its input is a tensor (`op_is_tensor()` is `FALSE` for the symbolic tensors R traces with)"
  )
)

# `name()` found in `where` as one of opaque_functions, described; else
# NULL.
opaque_call <- function(name, where) {
  if (is.null(where)) {
    return(NULL)
  }
  for (pkg in names(opaque_functions)) {
    what <- opaque_functions[[pkg]][name]
    if (is.na(what)) {
      next
    }
    if (is_namespace_function(get(name, envir = where), pkg, name)) {
      return(paste0(
        if (pkg == "keras3") what else sprintf("%s (`%s()`)", what, name),
        ","
      ))
    }
  }
  NULL
}

# Whether `code` reads `name` other than in updates of it with `<<-`
# (`n <<- n + 1` counts; `lambda <- n / 1000` reads).
read_beside_update <- function(name, code) {
  if (is.symbol(code)) {
    return(identical(as.character(code), name))
  }
  if (!is.call(code)) {
    return(FALSE)
  }
  if (identical(code[[1]], as.name("<<-"))) {
    target <- code[[2]]
    while (is.call(target)) {
      target <- target[[2]]
    }
    if (identical(as.character(target), name)) {
      return(FALSE)
    }
  }
  any(vapply(as.list(code), read_beside_update, NA, name = name))
}

# Whether `x` is a tensor of a trace or transform, not a value: Keras'
# symbolic tensor, a JAX tracer, a TensorFlow graph tensor.
is_traced_tensor <- function(x) {
  inherits(
    x,
    c(
      "keras.src.backend.common.keras_tensor.KerasTensor",
      "jax._src.core.Tracer",
      "tensorflow.python.framework.ops.SymbolicTensor"
    )
  )
}

# What changed_capture() reads of `found`, made once: the bindings grouped
# by environment (their keys, and values as `mget()` returns them, with
# `absent` for a field read as NULL) and the numbers of fields. One
# `mget()` and one `identical()` per environment: a call's check costs a
# few microseconds, however many values f reads.
capture_check <- function(found) {
  groups <- list()
  sizes <- list()
  options <- list()
  for (binding in found) {
    if (!is.null(binding$size)) {
      sizes[[length(sizes) + 1L]] <- binding
      next
    }
    if (!is.null(binding$option)) {
      options[binding$name] <- list(binding)
      next
    }
    at <- Position(\(g) identical(g$env, binding$env), groups)
    if (is.na(at)) {
      at <- length(groups) + 1L
      groups[[at]] <- list(env = binding$env, values = list(), names = NULL)
    }
    value <- if (isTRUE(binding$absent)) absent else binding$value
    groups[[at]]$values[binding$key] <- list(value)
    groups[[at]]$names[[binding$key]] <- binding$name
  }
  list(groups = groups, sizes = sizes, options = unname(options))
}

# What `code` looks up by a name written in it, which findGlobals() does
# not see: variables read with `get("w")` or `get0("w")` (from the
# function's frame up, as a variable is read), and options read with
# `getOption("x")`. A name computed at run time (`get(name)`) is not
# known before the call, and `get()` from a given environment is left to
# that environment's variable (followed through all its fields).
literal_lookups <- function(code) {
  names <- character()
  options <- character()
  literal <- function(x) is.character(x) && length(x) == 1L && !is.na(x)
  walk <- function(expr) {
    if (!is.call(expr)) {
      return()
    }
    lapply(as.list(expr), walk)
    fun <- expr[[1]]
    if (!is.symbol(fun)) {
      return()
    }
    fun <- as.character(fun)
    if (fun %in% c("get", "get0", "getOption")) {
      matched <- tryCatch(
        match.call(get(fun, envir = baseenv()), expr),
        error = function(e) NULL
      )
      if (is.null(matched)) {
        return()
      }
      if (fun == "getOption" && literal(matched$x)) {
        options <<- c(options, matched$x)
      } else if (
        fun != "getOption" &&
          literal(matched$x) &&
          is.null(matched$envir) &&
          is.null(matched$pos) &&
          !isFALSE(matched$inherits)
      ) {
        names <<- c(names, matched$x)
      }
    }
  }
  walk(code)
  list(names = unique(names), options = unique(options))
}

# The variables a function assigns in its own frame (`z <- 1`,
# `assign("q", 3)`, a `for` loop's variable): a `get()` of one reads it
# there, not from outside.
local_names <- function(fn) {
  tryCatch(
    codetools::findFuncLocals(formals(fn), body(fn)),
    error = function(e) character()
  )
}

# The value of a field that did not exist when f was traced.
absent <- structure(list(), class = "customgrad_absent")

# The fields of variable `name` that `code` reads as `name$a`,
# `name[["a"]]` or deeper (`name$a$b`): a list of paths (`c("a", "b")`),
# or NULL where `code` uses `name` otherwise (passes it on, `get()`s from
# it, indexes it by a variable): then all its fields count.
field_paths <- function(code, name) {
  paths <- list()
  whole <- FALSE
  walk <- function(expr) {
    if (is.symbol(expr)) {
      whole <<- whole || identical(as.character(expr), name)
    } else if (is.call(expr)) {
      path <- field_path(expr, name)
      if (is.null(path)) {
        lapply(as.list(expr), walk)
      } else {
        paths[[length(paths) + 1L]] <<- path
      }
    }
  }
  walk(code)
  if (!whole) unique(paths)
}

# `c("a", "b")` for `expr` = `name$a$b` (or `name[["a"]]$b`), else NULL.
field_path <- function(expr, name) {
  path <- character()
  while (
    is.call(expr) &&
      length(expr) == 3L &&
      (identical(expr[[1]], quote(`$`)) || identical(expr[[1]], quote(`[[`)))
  ) {
    field <- expr[[3]]
    if (is.symbol(field) && identical(expr[[1]], quote(`$`))) {
      field <- as.character(field)
    }
    if (!is.character(field) || length(field) != 1L) {
      return(NULL) # `name[[i]]`: which field is known only when it runs
    }
    path <- c(field, path)
    expr <- expr[[2]]
  }
  if (length(path) && is.symbol(expr) && identical(as.character(expr), name)) {
    path
  }
}

# The first of `captured` no longer bound to the value recorded, as its
# name, or NULL. `identical()` first compares the objects' addresses: the
# usual case, nothing rebound, costs no comparison of values; and the
# recorded value being referenced, R copies it on modification rather
# than changing it in place.
changed_capture <- function(captured) {
  check <- attr(captured, "check")
  for (group in check$groups) {
    values <- group$values
    now <- mget(
      names(values),
      envir = group$env,
      inherits = FALSE,
      ifnotfound = list(absent)
    )
    if (!identical(now, values)) {
      for (key in names(values)) {
        if (
          !identical(now[[key]], values[[key]]) &&
            !same_python_object(now[[key]], values[[key]])
        ) {
          return(group$names[[key]])
        }
      }
    }
  }
  for (sized in check$sizes) {
    if (length(sized$env) != sized$size) {
      return(sized$name) # a field added or removed
    }
  }
  for (option in check$options) {
    if (!identical(getOption(option$option), option$value)) {
      return(option$name)
    }
  }
  NULL
}

# Whether `x` is an R environment whose fields f may read and the user
# change (`cfg$lr <- 0.1`): not a Python object (reticulate's are
# environments), a package's, or the global environment (whose variables
# f reads are bindings of their own).
is_field_env <- function(x) {
  is.environment(x) &&
    !reticulate::is_py_object(x) &&
    !identical(x, globalenv()) &&
    !is_package_env(x)
}

# Whether `a` and `b` are R handles of one Python object (reticulate makes
# a new handle each time one is fetched, `model$weights[[1]]`).
same_python_object <- function(a, b) {
  reticulate::is_py_object(a) &&
    reticulate::is_py_object(b) &&
    identical(reticulate::py_id(a), reticulate::py_id(b))
}

# Called before each call from R of a traced function: where a captured
# value changed, stop replaying traces. `traced` is the Python object whose
# `untrace()` makes every later call run R. The message (or, with
# `trace = "strict"`, the error) names the variable.
watch_captures <- function(state, traced, what, kind, call) {
  name <- changed_capture(state$captured)
  if (is.null(name)) {
    return(invisible())
  }
  n_traces <- reticulate::py_get_attr(traced, "n_traces")
  if (identical(reticulate::py_to_r(n_traces), 0L)) {
    # No trace holds the old value (none was made, or each failed and R
    # runs at every call): the values now are those the next trace holds.
    state$captured <- captured_bindings(state$f)
    return(invisible())
  }
  bullets <- c(
    "x" = "It reads {.code {name}} from outside its arguments, and {.code {name}} has changed since {what} was traced: the trace holds its old value.",
    "i" = paste(
      "Pass {.code {name}} as an argument to run it traced, or",
      untraced_hint(kind)
    )
  )
  if (identical(state$trace, "strict")) {
    abort_customgrad(
      c("{what} can't be replayed with `trace = \"strict\"`.", bullets),
      class = "trace",
      call = call
    )
  }
  state$captured <- NULL # checked no more: R runs f at every call
  traced$untrace()
  cli::cli_inform(
    c("!" = "{what} can't be replayed, so R runs it at every call.", bullets),
    class = c("customgrad_message_fallback", "customgrad_message")
  )
  invisible()
}

# Targets of `<<-` in `expr` (f's own state, such as a counter of its
# traces): f changes them itself, while it is traced.
superassigned <- function(expr) {
  if (is.call(expr)) {
    targets <- unlist(lapply(as.list(expr)[-1], superassigned))
    if (identical(expr[[1]], as.name("<<-"))) {
      target <- expr[[2]]
      # The variable of `x$a <<-`, `x[[i]] <<-`, `names(x) <<-`.
      while (is.call(target)) {
        target <- target[[2]]
      }
      targets <- c(targets, as.character(target))
    }
    return(unique(targets))
  }
  character()
}

# The environment, from `env` up, where `name` is bound, or NULL.
binding_env <- function(name, env) {
  while (!identical(env, emptyenv())) {
    if (exists(name, envir = env, inherits = FALSE)) {
      return(env)
    }
    env <- parent.env(env)
  }
  NULL
}

# Whether `env` is a package's: its namespace, its imports, the attached
# package, or base's. (Not the frames of a package's functions: testthat
# runs tests in environments whose parent is the package's namespace.)
is_package_env <- function(env) {
  isNamespace(env) ||
    identical(env, baseenv()) ||
    identical(env, emptyenv()) ||
    startsWith(environmentName(env), "package:") ||
    startsWith(environmentName(env), "imports:")
}
