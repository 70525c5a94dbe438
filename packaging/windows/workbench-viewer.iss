; Inno Setup 6 script of the Workbench viewer installer for Windows.
; NOT RUN in this project's CI (no Windows machine there): build-windows.ps1 calls it, and the GitHub
; Actions workflow .github/workflows/viewer-packages.yml runs that on a hosted Windows runner.
;   iscc /DAppVersion=0.1.0 /DSourceDir=out\.build\dist\workbench-viewer /DOutputDir=out workbench-viewer.iss
; Installs per user by default (no administrator needed), or for all users when asked.

#ifndef AppVersion
  #error Pass the version: iscc /DAppVersion=X.Y.Z ...
#endif
#ifndef SourceDir
  #error Pass the PyInstaller folder: iscc /DSourceDir=...\workbench-viewer ...
#endif
#ifndef OutputDir
  #define OutputDir "."
#endif

[Setup]
AppId={{6B1D7E52-2C1F-4F0B-9A8E-5D3C2A7B9E41}
AppName=Workbench Viewer
AppVersion={#AppVersion}
AppVerName=Workbench Viewer {#AppVersion}
AppPublisher=Workbench
DefaultDirName={autopf}\Workbench Viewer
DefaultGroupName=Workbench Viewer
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
OutputDir={#OutputDir}
OutputBaseFilename=workbench-viewer-{#AppVersion}-windows-x64-setup
UninstallDisplayIcon={app}\workbench-viewer.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Workbench Viewer"; Filename: "{app}\workbench-viewer.exe"
Name: "{autodesktop}\Workbench Viewer"; Filename: "{app}\workbench-viewer.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\workbench-viewer.exe"; Description: "{cm:LaunchProgram,Workbench Viewer}"; Flags: nowait postinstall skipifsilent
