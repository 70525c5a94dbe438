# Builds the Workbench viewer for Windows: the PyInstaller one-folder app, checked with --smoke, and
# an Inno Setup installer, OUT_DIR\workbench-viewer-VERSION-windows-x64-setup.exe.
# NOT RUN in this project's CI (no Windows machine there); .github/workflows/viewer-packages.yml runs
# it on a GitHub-hosted Windows runner. Needs Python >= 3.10 on the PATH and Inno Setup 6 (iscc).
#   powershell -File packaging\windows\build-windows.ps1 [-OutDir out]
param([string]$OutDir = "out")
$ErrorActionPreference = "Stop"

function Run([string]$What) {
    # native commands do not stop the script on failure by themselves
    if ($LASTEXITCODE -ne 0) { throw "$What failed (exit code $LASTEXITCODE)" }
}

$Repo = (Resolve-Path "$PSScriptRoot\..\..").Path
New-Item -ItemType Directory -Force -Path $OutDir | Out-Null
$Out = (Resolve-Path $OutDir).Path
$Work = Join-Path $Out ".build"
if (Test-Path $Work) { Remove-Item -Recurse -Force $Work }

python -m venv "$Work\venv"; Run "python -m venv"
$Py = "$Work\venv\Scripts\python.exe"
& $Py -m pip install -q --upgrade pip; Run "pip upgrade"
# Pillow lets PyInstaller turn the PNG icon into the .exe's .ico
& $Py -m pip install -q "$Repo[gui]" pyinstaller==6.22.3 pillow; Run "pip install"
& $Py -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ('torch', 'transformers')))"
Run "the no-torch check"
$Version = (& $Py -c "from importlib.metadata import version; print(version('llm-workbench'))").Trim()

& "$Work\venv\Scripts\pyinstaller.exe" --noconfirm --log-level WARN --distpath "$Work\dist" `
    --workpath "$Work\pyi" "$Repo\packaging\workbench-viewer.spec"; Run "PyInstaller"
$App = "$Work\dist\workbench-viewer"

# The smoke test on the desktop the runner has (Qt's windows platform), printing its one line
$env:QT_QPA_PLATFORM = "windows"
& "$App\workbench-viewer.exe" --smoke; Run "workbench-viewer --smoke"
Remove-Item Env:QT_QPA_PLATFORM

Compress-Archive -Path $App -DestinationPath "$Out\workbench-viewer-$Version-windows-x64.zip" -Force
$Iscc = (Get-Command iscc -ErrorAction SilentlyContinue).Source
if (-not $Iscc) { $Iscc = "${env:ProgramFiles(x86)}\Inno Setup 6\ISCC.exe" }
& $Iscc /Q "/DAppVersion=$Version" "/DSourceDir=$App" "/DOutputDir=$Out" `
    "$Repo\packaging\windows\workbench-viewer.iss"; Run "Inno Setup"
Get-ChildItem $Out -File | Format-Table Name, Length
