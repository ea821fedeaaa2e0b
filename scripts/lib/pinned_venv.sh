# pinned_venv.sh - sourced by scripts/torch_venv.sh and scripts/perfetto_venv.sh:
# one pinned package from PyPI in a virtual environment outside the source
# tree, made once and reused, the path of its python printed on stdout
# (everything else goes to stderr).
#
#   pinned_venv NAME PACKAGE VERSION WHEELS [CHECK]
#
# The venv is ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/venv-NAME-VERSION; the
# wheels are downloaded once into WHEELS and installed from there without the
# index, so a venv removed by hand is rebuilt offline. CHECK, Python code, is
# run in the venv after the install (what the tests need must import). A
# stamp file in the venv, written last, makes a second run return at once;
# an interrupted install has none and is completed by the next run. Runs
# wait for each other (flock on one lock per NAME), so parallel test runs
# share one install. PYTHON picks the interpreter the venv is made from
# (default python3); on a Debian machine without the venv module,
# python3-venv is installed as scripts/deps.sh installs packages (root,
# apt-get).
pinned_venv() {
    local name=$1 package=$2 version=$3 wheels=$4 check=${5:-}
    local python=${PYTHON:-python3}
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim
    local venv=$cache/venv-$name-$version
    local stamp=$venv/.fsdpshim-installed
    say() { echo "${name}_venv: $*" >&2; }
    # What the stamp certifies: the package's version and the interpreter it
    # was installed for (a venv made from another Python is not the same
    # install).
    want_stamp() {
        "$venv/bin/python" -c 'import sys; print(sys.argv[1] + "==" + sys.argv[2], "python", sys.version.split()[0])' \
            "$package" "$version"
    }
    installed() {
        [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(want_stamp 2>/dev/null)" ]
    }

    if installed; then
        echo "$venv/bin/python"
        return 0
    fi
    mkdir -p "$wheels"
    exec 9>"$cache/venv-$name.lock"
    flock 9
    if installed; then # made by a run we waited for
        echo "$venv/bin/python"
        return 0
    fi

    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
        if [ "$(id -u)" -ne 0 ]; then
            say "need root to install python3-venv (run: sudo apt-get install -y python3-venv)"
            return 1
        fi
        say "installing python3-venv"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    fi
    # A venv whose interpreter no longer runs (its Python was removed or
    # upgraded) cannot be repaired in place.
    if [ -e "$venv" ] && ! "$venv/bin/python" -c '' 2>/dev/null; then
        say "removing $venv: its python does not run"
        rm -rf "$venv"
    fi
    if [ ! -e "$venv" ]; then
        say "creating $venv from $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
        "$python" -m venv "$venv"
    fi

    local pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
    local have
    have=$("$venv/bin/python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' \
        "$package" 2>/dev/null || true)
    if [ "$have" = "$version" ] && "${pip[@]}" check >/dev/null 2>&1; then
        say "$package $version is already installed in $venv"
    elif ! "${pip[@]}" install --quiet --no-index --find-links "$wheels" "$package==$version" >&2 2>/dev/null; then
        say "downloading $package $version and its dependencies into $wheels (once)"
        "${pip[@]}" download --quiet --only-binary=:all: -d "$wheels" "$package==$version" >&2
        say "installing $package $version into $venv"
        "${pip[@]}" install --quiet --no-index --find-links "$wheels" "$package==$version" >&2
    fi
    if [ -n "$check" ]; then "$venv/bin/python" -c "$check" >&2; fi

    want_stamp >"$stamp"
    echo "$venv/bin/python"
}
