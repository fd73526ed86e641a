#!/usr/bin/env bash
# docs.include_layers: the include graph inside a module has no upward edge, in the layer order
# docs/architecture.md states.
#
#   tests/docs/include_layers.sh SOURCE_DIR
#
# The format docs/architecture.md follows for this (cells hold no '|'):
#
# A layer table: a Markdown table whose header row begins with the cells
#     | MODULE layer | paths |
# (MODULE: a top-level folder, e.g. `analyzer layer`; further columns are not read), one row per
# layer, the lowest first. The first cell names the layer; the paths cell holds, in backticks,
# the files (`analyzer/options.hpp`) and folders (`analyzer/trace/`, with the trailing slash) of
# the layer. A file belongs to the layer of the longest path that holds it; every source file of
# the module must belong to one (a folder `MODULE/` row takes the rest), and every subfolder of
# the module must be named by its own path.
#
# Checked for each layer table:
#   - no file of the module includes ("MODULE/...") a file of a higher layer;
#   - a layer whose name begins with "umbrella" (headers that include a whole module for
#     programs outside it) is included by no production file (only tests/ and bench/ may);
#   - a layer whose third cell says "no JSON" includes no <nlohmann/...> header.
set -euo pipefail
export LC_ALL=C

SOURCE=${1:?usage: include_layers.sh SOURCE_DIR}
SOURCE=$(cd "$SOURCE" && pwd)
DOC=$SOURCE/docs/architecture.md
[ -f "$DOC" ] || { echo "FAIL: no $DOC" >&2; exit 1; }

problems=()
problem() { problems+=("$*"); }

# Rows of the tables whose header begins with "<module> layer|paths": module<TAB>layer<TAB>paths.
layer_rows() {
  awk '
    function cells(line,   n, i, out, parts) {
      sub(/^[[:space:]]*\|/, "", line); sub(/\|[[:space:]]*$/, "", line)
      n = split(line, parts, "|")
      out = ""
      for (i = 1; i <= n; i++) {
        gsub(/^[[:space:]]+|[[:space:]]+$/, "", parts[i])
        out = out (i > 1 ? "\t" : "") parts[i]
      }
      return out
    }
    state == 0 && /^[[:space:]]*\|/ {
      split(tolower(cells($0)), head, "\t")
      if (head[1] ~ /^[a-z_]+ layer$/ && head[2] == "paths") {
        module = head[1]; sub(/ layer$/, "", module); state = 1
      }
      next
    }
    state == 1 { state = 2; next }  # the |---| line
    state == 2 && /^[[:space:]]*\|/ { print module "\t" cells($0); next }
    state == 2 { state = 0 }
  ' "$DOC"
}

sources_of() {  # module folder -> its source files, relative to SOURCE
  (cd "$SOURCE" && find "$1" -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' \
    -o -name '*.cu' -o -name '*.c' -o -name '*.def' -o -name '*.in' \) | sort)
}

# "file<TAB>included" for every #include "MODULE/..." line of the given files.
includes_of() {  # module, files...
  local module=$1 file
  shift
  for file in "$@"; do
    sed -nE 's@^[[:space:]]*#[[:space:]]*include[[:space:]]*"('"$module"'/[^"]+)".*@\1@p' \
      "$SOURCE/$file" | sed "s@^@$file\t@"
  done
}

rows=$(layer_rows)
[ -n "$rows" ] || problem "no layer table: a table with the header | MODULE layer | paths |"
modules=$(cut -f1 <<<"$rows" | sort -u)

for module in $modules; do
  if [ ! -d "$SOURCE/$module" ]; then
    problem "layer table '$module layer': there is no folder $module/"
    continue
  fi
  declare -A path_layer=() layer_rank=() umbrella=() no_json=()
  rank=0
  while IFS=$'\t' read -r row_module layer paths_cell holds _; do
    [ "$row_module" == "$module" ] || continue
    rank=$((rank + 1))
    layer_rank[$layer]=$rank
    case "$layer" in umbrella*) umbrella[$layer]=1 ;; esac
    case "$holds" in *"no JSON"*) no_json[$layer]=1 ;; esac
    paths=$(grep -oE '`[^`]+`' <<<"$paths_cell" | tr -d '`' || true)
    [ -n "$paths" ] || problem "$module layer '$layer': its paths cell names no \`path\`"
    for path in $paths; do
      case "$path" in "$module"/*) ;; *)
        problem "$module layer '$layer': path $path is not in $module/"
        continue ;;
      esac
      [ -e "$SOURCE/$path" ] || problem "$module layer '$layer': there is no $path"
      [ -z "${path_layer[$path]:-}" ] || problem "$module layers: $path is in two layers"
      path_layer[$path]=$layer
    done
  done <<<"$rows"

  # Every subfolder named by its own path.
  while IFS= read -r folder; do
    [ -n "$folder" ] || continue
    [ -n "${path_layer[$folder/]:-}" ] ||
      problem "$module layers: folder $folder/ is in no layer (name it in a paths cell)"
  done < <(cd "$SOURCE" && find "$module" -mindepth 1 -type d | sort)

  # Each file's layer: the longest path that holds it.
  declare -A file_layer=()
  mapfile -t files < <(sources_of "$module")
  for file in "${files[@]}"; do
    best= best_length=0
    for path in "${!path_layer[@]}"; do
      case "$path" in
        */) [[ "$file" == "$path"* ]] || continue ;;
        *) [ "$file" == "$path" ] || continue ;;
      esac
      if [ "${#path}" -gt "$best_length" ]; then
        best=$path best_length=${#path}
      fi
    done
    if [ -z "$best" ]; then
      problem "$module layers: $file is in no layer"
      continue
    fi
    file_layer[$file]=${path_layer[$best]}
  done

  # No upward edge.
  while IFS=$'\t' read -r file included; do
    [ -n "$file" ] || continue
    from=${file_layer[$file]:-}
    to=${file_layer[$included]:-}
    [ -n "$from" ] || continue
    if [ -z "$to" ]; then
      [ -e "$SOURCE/$included" ] || continue  # generated in the build tree
      problem "$file includes $included, which is in no layer"
      continue
    fi
    if [ "${layer_rank[$to]}" -gt "${layer_rank[$from]}" ]; then
      problem "upward include: $file ($module layer '$from') includes $included" \
        "(layer '$to', higher)"
    fi
  done < <(includes_of "$module" "${files[@]}")

  # No JSON where the table says so.
  for file in "${files[@]}"; do
    layer=${file_layer[$file]:-}
    [ -n "$layer" ] && [ -n "${no_json[$layer]:-}" ] || continue
    if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<nlohmann/' "$SOURCE/$file"; then
      problem "$file ($module layer '$layer', no JSON) includes a nlohmann header"
    fi
  done

  # Umbrellas only for tests and benches.
  if [ "${#umbrella[@]}" -gt 0 ]; then
    mapfile -t production < <(cd "$SOURCE" && for dir in */; do
      dir=${dir%/}
      case "$dir" in tests | bench | build* | docs | scripts) continue ;; esac
      [ -f "$dir/CMakeLists.txt" ] || continue
      sources_of "$dir"
    done)
    while IFS=$'\t' read -r file included; do
      [ -n "$file" ] || continue
      layer=${file_layer[$included]:-}
      [ -n "$layer" ] && [ -n "${umbrella[$layer]:-}" ] || continue
      problem "umbrella include: $file includes $included ($module layer '$layer'): include" \
        "the headers it uses"
    done < <(includes_of "$module" "${production[@]}")
  fi
  unset path_layer layer_rank umbrella no_json file_layer
done

if [ "${#problems[@]}" -gt 0 ]; then
  echo "the include graph disagrees with docs/architecture.md's layers (format: the head of $0):" >&2
  printf 'FAIL: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "ok: no upward include in $(wc -w <<<"$modules") layered modules ($(tr '\n' ' ' <<<"$modules"| sed 's/ $//'))"
