package config

import "time"

// checkAuditBounds applies the defaults of the audit log's size bounds (audit.max_value_bytes,
// audit.retention) and checks given ones.
func (d *decoder) checkAuditBounds(a *Audit, src *source) {
	loc := location{path: "audit"}
	switch {
	case !src.has("max_value_bytes"):
		a.MaxValueBytes = DefaultAuditMaxValueBytes
	case src.valid("max_value_bytes") && a.MaxValueBytes < MinAuditMaxValueBytes:
		d.errorf(src.valueLine("max_value_bytes"), loc.field("max_value_bytes"),
			"must be at least %d bytes, got %d; remove it for the default %d", MinAuditMaxValueBytes, a.MaxValueBytes, DefaultAuditMaxValueBytes)
	}

	r := &a.Retention
	rs := d.src[r]
	if rs == nil {
		rs = &source{}
	}
	loc = loc.field("retention")
	switch {
	case !rs.has("max_bytes"):
		r.MaxBytes = DefaultAuditMaxBytes
	case rs.valid("max_bytes") && r.MaxBytes != 0 && r.MaxBytes < MinAuditMaxBytes:
		d.errorf(rs.valueLine("max_bytes"), loc.field("max_bytes"),
			"must be 0 (keep any amount) or at least %d bytes, got %d", MinAuditMaxBytes, r.MaxBytes)
	}
	switch {
	case !rs.has("max_age"):
		r.MaxAge = 0
	case rs.valid("max_age") && r.MaxAge < 0:
		d.errorf(rs.valueLine("max_age"), loc.field("max_age"), "must not be negative; write 0s to keep records of any age")
	case rs.valid("max_age") && r.MaxAge > 0 && time.Duration(r.MaxAge) < time.Minute:
		d.errorf(rs.valueLine("max_age"), loc.field("max_age"),
			"is %s; keep at least a minute of records (write 0s to keep records of any age)", time.Duration(r.MaxAge))
	}
}
