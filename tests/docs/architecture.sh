#!/usr/bin/env bash
# docs.architecture: docs/architecture.md and the source tree agree on the modules, their CMake
# targets and dependencies, and the analyzer's detectors and finding kinds.
#
#   tests/docs/architecture.sh SOURCE_DIR [BUILD_DIR]
#
# The format docs/architecture.md follows for this (cells hold no '|'):
#
# 1. The module table: the Markdown table whose header row begins with the cells
#        | module | folder | targets | depends on |
#    (further columns may follow and are not read), one row per module:
#      module      the module's name, plain or in backticks;
#      folder      the top-level folder, in backticks with a trailing slash: `interpose/`;
#      targets     every target the folder's CMakeLists.txt makes with add_library or
#                  add_executable, each in backticks, and nothing else in backticks;
#      depends on  the modules whose targets the module's targets link (target_link_libraries,
#                  PUBLIC and PRIVATE alike, the module's own targets left out), separated by
#                  commas; each item's first word is a module name, a folder or a target of the
#                  module meant, in backticks or not (words after it are a remark); "-" for none.
#    Every top-level folder whose CMakeLists.txt makes a library or an executable has a row,
#    except tests/ (the test suite, not a module); every row's folder is such a folder.
#
# 2. The detector table: the Markdown table whose header row begins with the cells
#        | detector | finding kinds |
#    one row per analyzer detector, i.e. per file named detect_*.cpp anywhere in the source
#    tree: first cell the file's base name in backticks (`detect_hangs`), second cell every
#    finding kind the file names (finding_kind::NAME), each in backticks, and nothing else in
#    backticks.
#
# 3. Every finding kind of the COMMTAP_FINDING_KINDS X-macro list (in whichever header defines
#    it) appears in backticks somewhere in the page, and the detector table names no other kind.
set -euo pipefail
export LC_ALL=C

SOURCE=${1:?usage: architecture.sh SOURCE_DIR [BUILD_DIR]}
BUILD=${2:-}
SOURCE=$(cd "$SOURCE" && pwd)
DOC=$SOURCE/docs/architecture.md
[ -f "$DOC" ] || { echo "FAIL: no $DOC" >&2; exit 1; }

problems=()
problem() { problems+=("$*"); }

# ---- The tree ------------------------------------------------------------------------------
# Top-level folders holding sources: not hidden, not a build directory (a CMakeCache.txt, or the
# build directory given).
build_real=
[ -n "$BUILD" ] && [ -d "$BUILD" ] && build_real=$(cd "$BUILD" && pwd)
source_dirs=()
for dir in "$SOURCE"/*/; do
  dir=${dir%/}
  [ -f "$dir/CMakeCache.txt" ] && continue
  [ "$dir" == "$build_real" ] && continue
  source_dirs+=("$dir")
done

# A CMakeLists.txt as one line without comments.
cmake_text() { sed 's/#.*//' "$1" | tr '\n\t' '  '; }

declare -A folder_targets  # folder -> "t1 t2 ..."
declare -A target_folder   # target -> folder
declare -A folder_links    # folder -> names its targets link
exempt_folders=" tests "
for dir in "${source_dirs[@]}"; do
  folder=${dir##*/}
  [ -f "$dir/CMakeLists.txt" ] || continue
  case "$exempt_folders" in *" $folder "*) continue ;; esac
  text=$(cmake_text "$dir/CMakeLists.txt")
  targets=$(grep -oE '\b(add_library|add_executable)[[:space:]]*\([[:space:]]*[^[:space:])]+' \
    <<<"$text" | sed -E 's/.*\([[:space:]]*//' | sort -u | tr '\n' ' ') || true
  [ -n "$targets" ] || continue
  folder_targets[$folder]=$targets
  for target in $targets; do
    case "$target" in *'$'*) problem "$folder/CMakeLists.txt: target name '$target' is made" \
      "from a variable; this test cannot check it" ;; esac
    target_folder[$target]=$folder
  done
  folder_links[$folder]=$(grep -oE '\btarget_link_libraries[[:space:]]*\([^)]*\)' <<<"$text" |
    sed -E 's/^target_link_libraries[[:space:]]*\([[:space:]]*[^[:space:])]+//; s/\)$//' |
    tr ' ' '\n' | grep -v '^$' | sort -u | tr '\n' ' ') || true
done

# Modules (folders) another folder's targets link: only names that are targets of a module.
linked_modules() {  # folder -> sorted module folders, one per line
  local name
  for name in ${folder_links[$1]:-}; do
    if [ -n "${target_folder[$name]:-}" ] && [ "${target_folder[$name]}" != "$1" ]; then
      echo "${target_folder[$name]}"
    fi
  done | sort -u
}

# ---- The page's tables ---------------------------------------------------------------------
# Rows of the table whose header begins with the given cells, cells separated by a tab.
table_rows() {  # header cells (lowercase, '|'-joined) -> rows
  awk -v want="$1" '
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
      header = tolower(cells($0)); gsub(/\t/, "|", header)
      if (substr(header "|", 1, length(want) + 1) == want "|") { state = 1; next }
    }
    state == 1 { state = 2; next }  # the |---| line
    state == 2 && /^[[:space:]]*\|/ { print cells($0); next }
    state == 2 { exit }
  ' "$DOC"
}
backticked() { grep -oE '`[^`]+`' <<<"$1" | tr -d '`' || true; }

# ---- (a), (b): modules, targets, dependencies ------------------------------------------------
module_rows=$(table_rows "module|folder|targets|depends on")
if [ -z "$module_rows" ]; then
  problem "no module table: a table with the header | module | folder | targets | depends on |"
fi
declare -A doc_module_folder  # module name -> folder
declare -A doc_folder_row     # folder -> "targets<TAB>depends on"
while IFS=$'\t' read -r module folder_cell targets_cell depends_cell _; do
  [ -n "$module$folder_cell" ] || continue
  module=$(tr -d '`' <<<"$module")
  folders=$(backticked "$folder_cell" | grep '/$' || true)
  if [ "$(grep -c . <<<"$folders")" -ne 1 ]; then
    problem "module table, row '$module': the folder cell must hold one \`folder/\`, holds" \
      "'$folder_cell'"
    continue
  fi
  folder=${folders%/}
  [ -n "${doc_folder_row[$folder]:-}" ] && problem "module table: folder $folder/ has two rows"
  doc_module_folder[$module]=$folder
  doc_folder_row[$folder]="$targets_cell"$'\t'"$depends_cell"
done <<<"$module_rows"

for folder in $(printf '%s\n' "${!folder_targets[@]}" | sort); do
  [ -n "${doc_folder_row[$folder]:-}" ] ||
    problem "module $folder/ (targets: ${folder_targets[$folder]% }) is not in the module table"
done
for folder in $(printf '%s\n' "${!doc_folder_row[@]}" | sort); do
  if [ -z "${folder_targets[$folder]:-}" ]; then
    if [ -f "$SOURCE/$folder/CMakeLists.txt" ]; then
      problem "module table lists $folder/, whose CMakeLists.txt makes no library or executable"
    else
      problem "module table lists $folder/, which is no top-level folder with a CMakeLists.txt"
    fi
    continue
  fi
  IFS=$'\t' read -r targets_cell depends_cell <<<"${doc_folder_row[$folder]}"
  documented=$(backticked "$targets_cell" | sort -u)
  actual=$(tr ' ' '\n' <<<"${folder_targets[$folder]}" | grep -v '^$' | sort -u)
  for target in $(comm -23 <(echo "$actual") <(echo "$documented")); do
    problem "module $folder/: target $target (in $folder/CMakeLists.txt) is not in its targets cell"
  done
  for target in $(comm -13 <(echo "$actual") <(echo "$documented")); do
    problem "module $folder/: targets cell names $target, which $folder/CMakeLists.txt does" \
      "not make"
  done

  # depends on: each comma-separated item's first word, as a module, folder or target.
  doc_deps=""
  while IFS= read -r item; do
    word=$(tr -d '`' <<<"$item" | awk '{print $1}')
    [ -z "$word" ] || [ "$word" == "-" ] && continue
    if [ -n "${doc_module_folder[$word]:-}" ]; then
      dep=${doc_module_folder[$word]}
    elif [ -n "${folder_targets[${word%/}]:-}" ]; then
      dep=${word%/}
    elif [ -n "${target_folder[$word]:-}" ]; then
      dep=${target_folder[$word]}
    else
      problem "module $folder/: depends on '$word', which is no module, folder or target"
      continue
    fi
    [ "$dep" == "$folder" ] || doc_deps+="$dep"$'\n'
  done < <(tr ',' '\n' <<<"$depends_cell")
  doc_deps=$(grep -v '^$' <<<"$doc_deps" | sort -u || true)
  real_deps=$(linked_modules "$folder")
  for dep in $(comm -23 <(echo "$real_deps") <(echo "$doc_deps")); do
    problem "module $folder/: its targets link $dep/'s (target_link_libraries), not in its" \
      "depends-on cell"
  done
  for dep in $(comm -13 <(echo "$real_deps") <(echo "$doc_deps")); do
    problem "module $folder/: depends-on cell names $dep/, which none of its targets links"
  done
done

# ---- (c): detectors and finding kinds ------------------------------------------------------
kinds_header=$(grep -rlE --include='*.hpp' --include='*.h' '^#define COMMTAP_FINDING_KINDS\(' \
  "${source_dirs[@]}" | head -1) || true
if [ -z "$kinds_header" ]; then
  problem "no header defines COMMTAP_FINDING_KINDS (the finding kinds' X-macro list)"
  kinds=""
else
  kinds=$(awk '/^#define COMMTAP_FINDING_KINDS\(/ { on = 1 }
               on { print; if ($0 !~ /\\[[:space:]]*$/) exit }' "$kinds_header" |
    sed 1d | grep -oE '\bX\([a-z_0-9]+\)' | sed -E 's/^X\((.*)\)$/\1/' | sort -u)
  [ -n "$kinds" ] || problem "${kinds_header#"$SOURCE"/}: no X(kind) in COMMTAP_FINDING_KINDS"
fi
doc_backticked=$(grep -oE '`[^`]+`' "$DOC" | tr -d '`' | sort -u)
for kind in $kinds; do
  grep -qxF "$kind" <<<"$doc_backticked" ||
    problem "finding kind $kind (${kinds_header#"$SOURCE"/}) is not in the page in backticks"
done

detector_files=$(find -H "${source_dirs[@]}" -name 'detect_*.cpp' -type f | sort)
detector_rows=$(table_rows "detector|finding kinds")
if [ -z "$detector_rows" ]; then
  problem "no detector table: a table with the header | detector | finding kinds |"
fi
declare -A doc_detector_kinds
while IFS=$'\t' read -r detector_cell kinds_cell _; do
  [ -n "$detector_cell" ] || continue
  name=$(backticked "$detector_cell" | head -1)
  name=${name##*/}
  name=${name%.cpp}
  if [ -z "$name" ]; then
    problem "detector table: row '$detector_cell' names no \`detect_...\`"
    continue
  fi
  doc_detector_kinds[$name]=$(backticked "$kinds_cell" | sort -u)
  for kind in ${doc_detector_kinds[$name]}; do
    grep -qxF "$kind" <<<"$kinds" ||
      problem "detector table: $name lists $kind, which is no kind of COMMTAP_FINDING_KINDS"
  done
done <<<"$detector_rows"

declare -A seen_detector
for file in $detector_files; do
  name=$(basename "$file" .cpp)
  if [ -n "${seen_detector[$name]:-}" ]; then
    problem "two detector files named $name.cpp: ${seen_detector[$name]} and ${file#"$SOURCE"/}"
  fi
  seen_detector[$name]=${file#"$SOURCE"/}
  if [ -z "${doc_detector_kinds[$name]+set}" ]; then
    problem "detector ${file#"$SOURCE"/} is not in the detector table"
    continue
  fi
  named=$(grep -oE '\bfinding_kind::[a-z_0-9]+' "$file" | sed 's/.*:://' | sort -u || true)
  for kind in $(comm -23 <(echo "$named") <(echo "${doc_detector_kinds[$name]}")); do
    problem "detector $name: its file names finding_kind::$kind, not in its row"
  done
  for kind in $(comm -13 <(echo "$named") <(echo "${doc_detector_kinds[$name]}")); do
    problem "detector $name: its row lists $kind, which its file does not name"
  done
done
for name in $(printf '%s\n' "${!doc_detector_kinds[@]}" | sort); do
  [ -n "${seen_detector[$name]:-}" ] ||
    problem "detector table lists $name, but there is no $name.cpp in the tree"
done

# ---- Verdict ---------------------------------------------------------------------------------
if [ "${#problems[@]}" -gt 0 ]; then
  echo "docs/architecture.md disagrees with the tree (format: the head of $0):" >&2
  printf 'FAIL: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "ok: docs/architecture.md names the ${#folder_targets[@]} modules, their targets and" \
  "dependencies, $(wc -w <<<"$detector_files") detectors and $(wc -w <<<"$kinds") finding kinds"
