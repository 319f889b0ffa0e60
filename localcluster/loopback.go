package localcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

const loopbackOnlyRole = "loopback-only"

// LoopbackOnlyCommand returns a command that runs name with args in a new
// network namespace whose only interface is loopback: nothing it starts can
// reach another machine, or be reached from one, so a dial off the machine
// fails at once instead of leaving it. Tests use it to prove a cluster
// hermetic (docs/localcluster.md). It needs root (CAP_SYS_ADMIN to make the
// namespace, CAP_NET_ADMIN in it to bring loopback up): the command is this
// program started again in the namespace, which brings loopback up and then
// executes name, found in $PATH.
func LoopbackOnlyCommand(name string, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to start %s in a loopback-only network: %w", name, err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), componentEnv+"="+loopbackOnlyRole)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	return cmd, nil
}

// execLoopbackOnly is the child of LoopbackOnlyCommand: already in its new
// network namespace, it brings loopback up and becomes the command.
func execLoopbackOnly(args []string) error {
	if len(args) == 0 {
		return errors.New("no command to run")
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bringing loopback up: %w", err)
	}
	if err := OnlyLoopback(); err != nil {
		return err
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	if err := os.Unsetenv(componentEnv); err != nil { // the command may import localcluster too
		return err
	}
	return syscall.Exec(path, args, os.Environ()) //nolint:gosec // the command line its caller gave, run as asked
}

// loopbackUp sets the loopback interface up, as `ip link set lo up` does.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// OnlyLoopback fails unless this process's network has loopback, up, as its
// only interface.
func OnlyLoopback() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback == 0 {
			return fmt.Errorf("network interface %s is not loopback: this process can reach other machines", i.Name)
		}
		if i.Flags&net.FlagUp == 0 {
			return fmt.Errorf("loopback interface %s is down", i.Name)
		}
	}
	if len(ifaces) == 0 {
		return errors.New("no network interface, not even loopback")
	}
	return nil
}
