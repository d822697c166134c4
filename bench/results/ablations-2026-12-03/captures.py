# The capture-check ablations of 2026-12-03 (bench/README.md): python3 captures.py C1 [R/captures.R] edits the file in place.
import sys
v = sys.argv[1]
p = sys.argv[2] if len(sys.argv) > 2 else 'R/captures.R'
s = open(p).read()
subs = {
  'C0': [('captured_bindings <- function(f) {\n', 'captured_bindings <- function(f) {\n  return(NULL) # ablation C0\n')],
  'C1': [('is_field_env <- function(x) {\n', 'is_field_env <- function(x) {\n  return(FALSE) # ablation C1\n')],
  'C2': [('    if (is.function(value)) {\n      return(visit(value))\n', '    if (is.function(value)) {\n      return() # ablation C2\n')],
  'C3': [('    lookups <- literal_lookups(code)\n', '    lookups <- list(names = character(), options = character()) # ablation C3\n')],
  'C4': [('    assigned <- superassigned(code)\n', '    assigned <- character() # ablation C4\n')],
  'C5': [('    if (length(sized$env) != sized$size) {', '    if (FALSE) { # ablation C5')],
  'C6': [('same_python_object <- function(a, b) {\n', 'same_python_object <- function(a, b) {\n  return(FALSE) # ablation C6\n')],
  'C7': [('    if (is.null(paths)) {\n      if (seen_before(value)) {', '    if (TRUE) { # ablation C7: all fields, no paths\n      if (seen_before(value)) {')],
}
for old, new in subs[v]:
    assert s.count(old) == 1, (v, old)
    s = s.replace(old, new)
open(p, 'w').write(s)
