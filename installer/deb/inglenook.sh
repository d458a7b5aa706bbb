#!/bin/sh
# /usr/bin/inglenook, installed by the inglenook .deb: the window with no arguments (or .gguf
# files to import), the command line otherwise (`inglenook doctor`, `inglenook serve`, …).
# The program itself checks, before Qt starts, that the X11 libraries Qt's xcb plugin needs
# are present, and names the packages to install when they are not.
exec /opt/inglenook/inglenook "$@"
