//go:build !linux

package bench

import "errors"

func procUsage(int) (Usage, error) {
	return Usage{}, errors.New("bench: broker usage needs Linux /proc")
}

func machineDetails() (string, string) { return "", "" }

const selfCPUSource = ""

func selfCPU() (float64, error) {
	return 0, errors.New("bench: loader usage is measured on Linux only")
}

func machineCPU() (float64, error) {
	return 0, errors.New("bench: machine usage is measured on Linux only")
}

func loadAvg() [3]float64 { return [3]float64{} }
