package optest

import "syscall"

// cpuSeconds is the user and kernel CPU time of the process so far.
func cpuSeconds() float64 {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var created, exited, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0
	}
	ticks := func(t syscall.Filetime) int64 { return int64(t.HighDateTime)<<32 | int64(t.LowDateTime) } // 100 ns each
	return float64(ticks(kernel)+ticks(user)) / 1e7
}
