#!/bin/sh
# %runscript of the mpilab images: `apptainer run IMAGE [--port N] [--ip ADDR] [--dir DIR]` serves
# JupyterLab on a writable copy of the labs (DIR, default ./mpilab-labs; copied from
# /opt/mpilab/labs on the first run, kept afterwards: the image itself is read-only).
port=8888; ip=127.0.0.1; dir=$PWD/mpilab-labs
while [ $# -gt 0 ]; do
    case "$1" in
        --port) port=$2; shift 2 ;;
        --ip) ip=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        *) echo "usage: apptainer run IMAGE [--port N] [--ip ADDR] [--dir DIR]; unknown argument '$1'" >&2
           exit 2 ;;
    esac
done
if [ ! -e "$dir" ]; then
    cp -R /opt/mpilab/labs "$dir" || exit 1
    echo "copied the labs to $dir (your work stays there)"
fi
token=${JUPYTER_TOKEN:-$(python3 -c 'import secrets; print(secrets.token_hex(16))')}
echo "JupyterLab: http://$ip:$port/lab?token=$token"
export JUPYTER_TOKEN="$token"
exec jupyter lab --no-browser --allow-root --ip="$ip" --port="$port" \
    --ServerApp.root_dir="$dir" --IdentityProvider.token="$token"
