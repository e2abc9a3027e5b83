"""Source builds: the job planner, its measured history, the watchdog over the compile jobs, the
watched build steps, patches of source-built packages."""
