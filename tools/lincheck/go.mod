module quiver/tools/lincheck

// 1.19: the oldest Go this must build with (Debian bookworm's golang-go); porcupine v1.3.1
// asks for 1.16. No newer language feature or library function is used here.
go 1.19

require github.com/anishathalye/porcupine v1.3.1
