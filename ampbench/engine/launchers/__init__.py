"""The launchers, one class per file; `Launcher.kinds()` imports every module here, so a new file is found."""
