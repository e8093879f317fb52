#!/bin/sh
# Seeds corpus/<target>/ from fixtures/patch-cases, in each target's input format.
set -eu
cd "$(dirname "$0")"
cases=../fixtures/patch-cases
mkdir -p corpus/patch_parse corpus/patch_apply corpus/edit_match
for dir in "$cases"/*/; do
    name=$(basename "$dir")
    cp "$dir/patch.diff" "corpus/patch_parse/$name"
    if [ -f "$dir/before.md" ]; then
        { cat "$dir/before.md"; printf '\0'; cat "$dir/patch.diff"; } > "corpus/patch_apply/$name"
        { cat "$dir/before.md"; printf '\0'; sed -n '2,3p' "$dir/before.md"; printf '\0new\n'; } > "corpus/edit_match/$name"
    else
        cp "$dir/patch.diff" "corpus/patch_apply/$name"
    fi
done
