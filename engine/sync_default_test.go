//go:build !samsa_faults

package engine

const plantedBugBuild = false
