#!/usr/bin/env bash
# model/'s folders are stages of the pipeline (model/README.md): hardware, workload, pricing, sim,
# study. A file may include the base headers (model/*.h) and folders of its own or an earlier
# stage, never a later one. Prints each violation (file: include) and exits 1 if there is any.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stages=(hardware workload pricing sim study)
rank() { local i; for i in "${!stages[@]}"; do [ "${stages[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo -1; }
bad=0
cd "$root"
for f in model/*.h model/*.cpp model/*/*.h model/*/*.cpp; do
  [ -e "$f" ] || continue
  dir=$(dirname "$f"); dir=${dir#model}; dir=${dir#/}
  [ "$dir" = "io" ] && continue                     # io reads and reports everything
  own=$([ -z "$dir" ] && echo -2 || rank "$dir")  # the base (-2) includes no stage at all
  while IFS= read -r inc; do
    target=$(echo "$inc" | sed -E 's#.*"model/([a-z_]+)/.*#\1#')
    [ "$target" = "$inc" ] && continue            # a base header
    t=$(rank "$target")
    if [ "$target" = "io" ] || [ "$t" -gt "$own" ]; then
      echo "$f: $inc (a later stage than ${dir:-the base})"; bad=1
    fi
  done < <(grep -o '#include "model/[a-z_]*/[a-z_]*\.h"' "$f" || true)
done
[ "$bad" = 0 ] && echo "check-layout: every include in model/ points to its own or an earlier stage"
exit "$bad"
