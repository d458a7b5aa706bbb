; Inglenook for Windows: a per-user installer (no administrator rights) around the PyInstaller
; one-folder bundle that `pyinstaller packaging/inglenook.spec` leaves in dist\inglenook on Windows.
;
;   makensis /DVERSION=0.1.0 /DPAYLOAD=dist\inglenook /DICON=build\icons\inglenook.ico ^
;            /DOUTFILE=dist\inglenook-0.1.0-setup.exe installer\windows\inglenook.nsi
;
; Installs into %LOCALAPPDATA%\Programs\Inglenook; the user's chats, models and settings live in
; %LOCALAPPDATA%\Inglenook (platformdirs), which neither an upgrade nor the uninstaller touches.
; Start menu shortcut, "Open with" for .gguf files, an entry in Settings -> Apps with an uninstaller.
; The payload must hold the native parts packaging/engine_libraries.py names for win32 (the spec
; stops otherwise): llama.cpp's llama.dll, ggml.dll, ggml-base.dll and its ggml-cpu-*.dll variants,
; mtmd.dll (images), pdfium.dll (PDFs, from pypdfium2_raw), and voice's: ctranslate2.dll (Whisper),
; onnxruntime.dll (its voice-activity model), PyAV's FFmpeg (av.libs\avcodec-*.dll, avformat-*.dll).
; No RPC server on Windows yet (scripts/llama_build.py builds it for Linux).
; Checked on Linux by compiling it with Debian's makensis against a dummy payload
; (tests/package/test_installer_recipes.py); not yet run on Windows.

Unicode true
!include "MUI2.nsh"

!ifndef VERSION
  !define VERSION "0.1.0"
!endif
!ifndef PAYLOAD
  !define PAYLOAD "..\..\dist\inglenook"
!endif
!ifndef ICON
  !define ICON "..\..\build\icons\inglenook.ico"
!endif
!ifndef OUTFILE
  !define OUTFILE "inglenook-${VERSION}-setup.exe"
!endif

!define APP "Inglenook"
!define EXE "inglenook.exe"
!define UNINSTALL_KEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Inglenook"
!define PROGID "Inglenook.gguf"

Name "${APP}"
OutFile "${OUTFILE}"
RequestExecutionLevel user
InstallDir "$LOCALAPPDATA\Programs\${APP}"
InstallDirRegKey HKCU "Software\${APP}" "InstallDir"
SetCompressor /SOLID lzma
Icon "${ICON}"
UninstallIcon "${ICON}"

!define MUI_ICON "${ICON}"
!define MUI_UNICON "${ICON}"
!define MUI_FINISHPAGE_RUN "$INSTDIR\${EXE}"
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH
!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES
!insertmacro MUI_LANGUAGE "English"

Section "Inglenook" SecMain
  SectionIn RO
  ; An upgrade replaces the program folder whole, so no file of an older bundle lingers; only
  ; a folder that holds Inglenook already is cleared (never one the user picked for other things).
  IfFileExists "$INSTDIR\${EXE}" 0 +2
    RMDir /r "$INSTDIR"
  SetOutPath "$INSTDIR"
  File /r "${PAYLOAD}\*.*"
  File "/oname=inglenook.ico" "${ICON}"
  WriteUninstaller "$INSTDIR\uninstall.exe"
  WriteRegStr HKCU "Software\${APP}" "InstallDir" "$INSTDIR"

  CreateShortcut "$SMPROGRAMS\${APP}.lnk" "$INSTDIR\${EXE}" "" "$INSTDIR\inglenook.ico"

  ; .gguf files: "Open with Inglenook" (a second launch hands the file to the running window).
  WriteRegStr HKCU "Software\Classes\.gguf\OpenWithProgids" "${PROGID}" ""
  WriteRegStr HKCU "Software\Classes\${PROGID}" "" "GGUF language model"
  WriteRegStr HKCU "Software\Classes\${PROGID}\DefaultIcon" "" "$INSTDIR\inglenook.ico"
  WriteRegStr HKCU "Software\Classes\${PROGID}\shell\open\command" "" '"$INSTDIR\${EXE}" "%1"'

  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayName" "${APP}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "Publisher" "The Inglenook developers"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "DisplayIcon" "$INSTDIR\inglenook.ico"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTALL_KEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTALL_KEY}" "NoRepair" 1
SectionEnd

Section "Uninstall"
  ; The program only: chats, models and settings in %LOCALAPPDATA%\Inglenook stay.
  Delete "$SMPROGRAMS\${APP}.lnk"
  RMDir /r "$INSTDIR"
  DeleteRegKey HKCU "Software\Classes\${PROGID}"
  DeleteRegValue HKCU "Software\Classes\.gguf\OpenWithProgids" "${PROGID}"
  ; The start-at-login entry the app writes (app/autostart.py), if the user turned it on.
  DeleteRegValue HKCU "Software\Microsoft\Windows\CurrentVersion\Run" "Inglenook"
  DeleteRegKey HKCU "${UNINSTALL_KEY}"
  DeleteRegKey HKCU "Software\${APP}"
SectionEnd
