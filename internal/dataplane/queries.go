package dataplane

import (
	"errors"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Stop detaches xfw from every interface of the namespace. The programs and
// maps are freed by the kernel once detached.
func Stop() error {
	forgetSession()
	ifaces, err := listInterfaces()
	if err != nil {
		return err
	}
	// The guard first: with the programs gone it would drop everything.
	errs := []error{RemovePinnedGuard()}
	for _, ifc := range ifaces {
		if err := detachInterface(ifc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Counters returns the counters of fam's running ruleset, indexed as the
// generation's counter indexes (0–2 policies, then rules), or nil when no
// ruleset of the family is loaded.
func Counters(fam ir.Family) ([]ir.Counters, error) {
	defer unmapOutsideSession()
	var out []ir.Counters
	err := withFamily(fam, func(cur *state, slot uint32) (err error) {
		out, err = cur.readCounters(slot)
		return err
	})
	return out, err
}

// withFamily calls fn with xfw's loaded state and the slot of fam's
// running generation; it does nothing when xfw is not loaded or fam has no
// ruleset. The state is closed when fn returns.
func withFamily(fam ir.Family, fn func(cur *state, slot uint32) error) error {
	cur, err := Current()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil
	}
	return fn(cur, cur.slot(fam))
}

// Running returns fam's running ruleset in its binary form (Update.Saved)
// and its counters, indexed as the generation's counter indexes (0–2
// policies, then rules); nil, nil when no ruleset of the family is loaded.
func Running(fam ir.Family) (saved []byte, counters []ir.Counters, err error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil, nil
	}
	if saved, err = cur.saved(cur.slot(fam)); err != nil {
		return nil, nil, err
	}
	if counters, err = cur.readCounters(cur.slot(fam)); err != nil {
		return nil, nil, err
	}
	return saved, counters, nil
}
