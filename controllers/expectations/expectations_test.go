package expectations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCreates(t *testing.T) {
	t.Run("a create not seen yet is awaited", func(t *testing.T) {
		e := New()
		e.Created("uid", 0)
		assert.True(t, e.Awaiting("uid", 0, false))
		assert.False(t, e.Awaiting("uid", 1, false), "another member was not created")
	})
	t.Run("a create seen in the cache settles its expectation", func(t *testing.T) {
		e := New()
		e.Created("uid", 0)
		assert.False(t, e.Awaiting("uid", 0, true))
		assert.False(t, e.Awaiting("uid", 0, false), "settled for good")
	})
	t.Run("a create lost on its way to the cache is retried once its expectation expires", func(t *testing.T) {
		e := New()
		now := time.Now()
		e.now = func() time.Time { return now }
		e.Created("uid", 0)
		assert.True(t, e.Awaiting("uid", 0, false))
		now = now.Add(TTL + time.Second)
		assert.False(t, e.Awaiting("uid", 0, false))
	})
}

func TestDeletes(t *testing.T) {
	t.Run("a delete claimed is not claimed again: one controller sends it", func(t *testing.T) {
		e := NewDeletes()
		assert.True(t, e.Claim("uid"))
		assert.False(t, e.Claim("uid"))
		assert.True(t, e.Claim("other"), "near miss: another object")
	})
	t.Run("a delete whose effect never reached the cache is sent again once it expires", func(t *testing.T) {
		e := NewDeletes()
		now := time.Now()
		e.now = func() time.Time { return now }
		e.Claim("uid")
		now = now.Add(TTL + time.Second)
		assert.True(t, e.Claim("uid"))
	})
	t.Run("a delete that failed is sent again on the next pass", func(t *testing.T) {
		e := NewDeletes()
		e.Claim("uid")
		e.Release("uid")
		assert.True(t, e.Claim("uid"))
	})
	t.Run("no memory always claims", func(t *testing.T) {
		var e *Deletes
		assert.True(t, e.Claim("uid"))
		assert.True(t, e.Claim("uid"))
	})
}
