# bash completion for the petdaq binaries (installed once per binary name). Options come
# from the binary's own --help, so they never drift from what it accepts.
_petdaq_complete() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  case $prev in
    -c|--config|-i|--input|-o|--output|--output-dir|--work-dir)
      COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
    --backend) COMPREPLY=($(compgen -W "cpu gpu auto" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "frames pcap hdf5 castor petsird" -- "$cur")); return ;;
  esac
  if [[ $cur == -* ]]; then
    local opts
    opts=$("$1" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][A-Za-z0-9-]*' | tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null
  fi
}
complete -F _petdaq_complete petdaqd petdaq-sim petdaq-sim-check petdaq-replay petdaq-offline \
  petdaq-dump petdaq-record petdaq-top petdaq-export petdaq-web petdaq-qa petdaq-calibrate \
  petdaq-ctl petdaq-runs
