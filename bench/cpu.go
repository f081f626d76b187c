package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of CPU times in /proc: USER_HZ, 100 on Linux.
const userHZ = 100

// cpuSample is the CPU time used so far by the load generator (this
// process), the server process, and PostgreSQL's processes, and by the
// whole machine. Without /proc only the first is known (ok is false);
// pgOK is false when PostgreSQL runs elsewhere.
type cpuSample struct {
	self   time.Duration
	server time.Duration
	// hop and redis are the delay proxy's and Redis's, when hopOK and
	// redisOK.
	hop, redis     time.Duration
	hopOK, redisOK bool
	// pg is the CPU time of each PostgreSQL process by pid.
	pg map[int]time.Duration
	// busy and total are the machine's CPU ticks, from /proc/stat.
	busy, total uint64
	ok, pgOK    bool
}

// cpuUse is the CPU time spent between two samples.
type cpuUse struct {
	Self   time.Duration `json:"bench_ns"`
	Server time.Duration `json:"server_ns"`
	PG     time.Duration `json:"postgres_ns"`
	// Busy is the share of the machine's CPU time that was busy, 0 to 1.
	Busy float64 `json:"machine_busy"`
	OK   bool    `json:"measured"`
	PGOK bool    `json:"postgres_measured"`
	// Hop is the delay proxy's CPU time (-hop), Redis the Redis server's
	// (scenarios that use it), each when measured.
	Hop     time.Duration `json:"hop_proxy_ns,omitempty"`
	HopOK   bool          `json:"hop_proxy_measured,omitempty"`
	Redis   time.Duration `json:"redis_ns,omitempty"`
	RedisOK bool          `json:"redis_measured,omitempty"`
}

// sampleCPU samples the processes; hopPID and redisPID are 0 when there
// are none to sample.
func sampleCPU(serverPID int, pgPIDs []int, hopPID, redisPID int) cpuSample {
	s := cpuSample{self: selfCPU(), pg: map[int]time.Duration{}}
	var ok bool
	if s.server, ok = procCPU(serverPID); !ok {
		return s
	}
	if hopPID != 0 {
		s.hop, s.hopOK = procCPU(hopPID)
	}
	if redisPID != 0 {
		s.redis, s.redisOK = procCPU(redisPID)
	}
	for _, pid := range pgPIDs {
		if t, ok := procCPU(pid); ok {
			s.pg[pid] = t
		}
	}
	s.busy, s.total, s.ok = machineTicks()
	return s
}

// since is the CPU time spent from s0 to s. PostgreSQL processes count
// when both samples saw them.
func (s cpuSample) since(s0 cpuSample) cpuUse {
	u := cpuUse{Self: s.self - s0.self, Server: s.server - s0.server, OK: s.ok && s0.ok}
	u.PGOK = u.OK && s.pgOK && s0.pgOK
	if u.HopOK = s.hopOK && s0.hopOK; u.HopOK {
		u.Hop = s.hop - s0.hop
	}
	if u.RedisOK = s.redisOK && s0.redisOK; u.RedisOK {
		u.Redis = s.redis - s0.redis
	}
	for pid, t := range s.pg {
		if t0, ok := s0.pg[pid]; ok {
			u.PG += t - t0
		}
	}
	if d := s.total - s0.total; u.OK && d > 0 {
		u.Busy = float64(s.busy-s0.busy) / float64(d)
	}
	return u
}

// plus adds u2, measured over w2 seconds, to u, measured over w.
func (u cpuUse) plus(u2 cpuUse, w, w2 float64) cpuUse {
	out := cpuUse{Self: u.Self + u2.Self, Server: u.Server + u2.Server, PG: u.PG + u2.PG, OK: u.OK && u2.OK, PGOK: u.PGOK && u2.PGOK,
		Hop: u.Hop + u2.Hop, HopOK: u.HopOK && u2.HopOK, Redis: u.Redis + u2.Redis, RedisOK: u.RedisOK && u2.RedisOK}
	if w+w2 > 0 {
		out.Busy = (u.Busy*w + u2.Busy*w2) / (w + w2)
	}
	return out
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads a process's user and system time from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}

// parseProcStat takes utime and stime, fields 14 and 15, counted after
// the command name, which may hold spaces and ends at the last ')'.
func parseProcStat(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// machineTicks reads the busy and total CPU ticks of all CPUs.
func machineTicks() (busy, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseMachineTicks(b)
}

// parseMachineTicks reads /proc/stat's first line: user nice system idle
// iowait irq softirq steal. Idle and iowait are not busy; steal is time
// the hypervisor gave to others, neither busy for us nor idle.
func parseMachineTicks(b []byte) (busy, total uint64, ok bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		v[i] = n
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6]
	return busy, busy + v[3] + v[4] + v[7], true
}

// isPostgres reports whether pid is a PostgreSQL process on this machine,
// which tells a local server from a remote one.
func isPostgres(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.HasPrefix(string(b), "postgres")
}

// findRedis returns the pid of the redis-server on this machine that
// serves addr, or 0.
func findRedis(addr string) int {
	_, port, _ := strings.Cut(addr, ":")
	dirs, _ := os.ReadDir("/proc")
	found, n := 0, 0
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile("/proc/" + d.Name() + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "redis-server" {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if port != "" && strings.Contains(string(cmdline), ":"+port) {
			return pid
		}
		found, n = pid, n+1
	}
	if n == 1 {
		return found
	}
	return 0
}

// machine describes the computer the run measured.
type machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory string `json:"memory"`
	OS     string `json:"os"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

func machineInfo() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", Memory: "unknown", OS: runtime.GOOS}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		if kib, err := strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
		}
	}
	if v := procField("/etc/os-release", "PRETTY_NAME"); v != "" {
		m.OS = strings.Trim(v, `"`)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField returns the value of the first "name: value" or "name=value"
// line of a file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			k, v, ok = strings.Cut(sc.Text(), "=")
		}
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
