#!/bin/sh
# mirai's container entrypoint. It starts as root only long enough to choose
# the user mirai runs as, then runs the command as that user with no
# capabilities (setpriv, from util-linux):
#   - MIRAI_UID (and MIRAI_GID, else the same number) when set;
#   - else the owner of the notes root (/notes) when that is not root, with
#     its group (or MIRAI_GID);
#   - else 1000:1000, the usual first user on a Linux desktop, which takes an
#     empty root-owned /notes (what Docker creates for a missing ./notes).
# A root-owned /notes that is not empty is someone's files: without MIRAI_UID
# it stops with exit 2 and one line saying what to do. Only the notes root
# itself, HOME and the module cache directory are ever chowned, never their
# contents.
# Arguments: none runs `mirai serve`; a mirai subcommand or option runs mirai
# with them (`index status`); anything else is a program to run (`sh -c ...`).
set -eu

fail() {
    echo "mirai-entrypoint: $*" >&2
    exit 2
}

case "${1:-}" in
    '') set -- mirai serve ;;
    -*) set -- mirai "$@" ;;
    *)
        case "$(command -v "$1" || true)" in
            /*) ;;
            *) set -- mirai "$@" ;;
        esac
        ;;
esac

# Already started as a user (docker run --user, compose `user:`): nothing to choose.
if [ "$(id -u)" != 0 ]; then
    exec "$@"
fi

notes=${NOTES_ROOT:-/notes}
cache=${MIRAI_CACHE_DIR:-/var/cache/mirai}
home=${HOME:-/home/mirai}
uid=${MIRAI_UID:-}
gid=${MIRAI_GID:-}

is_id() {
    case "$1" in
        '' | *[!0-9]*) return 1 ;;
    esac
}
if [ -n "$uid" ] && ! is_id "$uid"; then
    fail "MIRAI_UID=$uid is not a numeric user id; set it to the owner of your notes, e.g. MIRAI_UID=\$(id -u)"
fi
if [ -n "$gid" ] && ! is_id "$gid"; then
    fail "MIRAI_GID=$gid is not a numeric group id; set it to your group, e.g. MIRAI_GID=\$(id -g)"
fi

mkdir -p "$notes"
owner=$(stat -c %u "$notes")
group=$(stat -c %g "$notes")
empty=no
[ -z "$(ls -A "$notes")" ] && empty=yes

if [ -z "$uid" ]; then
    if [ "$owner" != 0 ]; then
        uid=$owner
        if [ -z "$gid" ] && [ "$group" != 0 ]; then
            gid=$group
        fi
    elif [ "$empty" = yes ]; then
        uid=1000
    else
        fail "$notes (./notes on the host) is owned by root and not empty; make it yours (sudo chown -R \"\$(id -u):\$(id -g)\" notes) or choose its user: MIRAI_UID=\$(id -u) MIRAI_GID=\$(id -g) docker compose up"
    fi
fi
[ -n "$gid" ] || gid=$uid
[ "$uid" != 0 ] || fail "MIRAI_UID=0: mirai does not run as root; set MIRAI_UID to the owner of your notes, e.g. MIRAI_UID=\$(id -u)"
[ "$gid" != 0 ] || fail "MIRAI_GID=0: mirai does not run with the root group; set MIRAI_GID to your group, e.g. MIRAI_GID=\$(id -g)"

# An empty root-owned notes root is the folder Docker made for a missing ./notes:
# it becomes the service user's (the folder only; it holds nothing).
if [ "$owner" = 0 ] && [ "$empty" = yes ]; then
    chown "$uid:$gid" "$notes"
fi

# What mirai writes outside the notes root: the compiled sandbox module (a
# volume, so a restart keeps it warm) and HOME. Private to the service user.
for dir in "$cache" "$home"; do
    mkdir -p "$dir"
    chown "$uid:$gid" "$dir"
    chmod 0700 "$dir"
done

exec setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    --inh-caps=-all --bounding-set=-all --no-new-privs -- "$@"
