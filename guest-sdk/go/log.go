package guest

import (
	"context"
	"log/slog"
	"strings"
)

// LogHandler is a slog.Handler writing to the host log (the WIT `log` import): the message
// and its attributes as one `key=value` text line, at the record's level. The host attributes
// the line to the plugin and the key and applies its filter and rate limits, so the handler
// enables every level.
type LogHandler struct {
	text *slog.TextHandler
	buf  *strings.Builder
}

// NewLogHandler makes a handler; opts may set AddSource or ReplaceAttr (the level and time
// attributes are the host's and are left out).
func NewLogHandler(opts *slog.HandlerOptions) *LogHandler {
	options := slog.HandlerOptions{Level: slog.LevelDebug - 4}
	if opts != nil {
		options.AddSource = opts.AddSource
	}
	replace := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
			return slog.Attr{}
		}
		if opts != nil && opts.ReplaceAttr != nil {
			return opts.ReplaceAttr(groups, a)
		}
		return a
	}
	options.ReplaceAttr = replace
	buf := &strings.Builder{}
	return &LogHandler{text: slog.NewTextHandler(buf, &options), buf: buf}
}

// Enabled is true: the host's filter decides.
func (h *LogHandler) Enabled(context.Context, slog.Level) bool { return true }

// Handle writes the record as one line to the host log.
func (h *LogHandler) Handle(ctx context.Context, record slog.Record) error {
	h.buf.Reset()
	if err := h.text.Handle(ctx, record); err != nil {
		return err
	}
	line := strings.TrimSuffix(h.buf.String(), "\n")
	// The text handler writes `msg=...` first; the host log shows the message plain.
	line = strings.TrimPrefix(line, "msg=")
	if unquoted, rest, ok := cutQuoted(line); ok {
		line = unquoted + rest
	}
	current.Log(record.Level, line)
	return nil
}

// WithAttrs adds attributes to every line.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{text: h.text.WithAttrs(attrs).(*slog.TextHandler), buf: h.buf}
}

// WithGroup qualifies later attributes with name.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{text: h.text.WithGroup(name).(*slog.TextHandler), buf: h.buf}
}

// cutQuoted unquotes a leading Go-quoted string the text handler wrote for a message with
// spaces: `"a b" k=v` is `a b`, ` k=v`.
func cutQuoted(line string) (string, string, bool) {
	if !strings.HasPrefix(line, `"`) {
		return "", "", false
	}
	for i := 1; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '"':
			text := line[1:i]
			if strings.ContainsRune(text, '\\') {
				return "", "", false
			}
			return text, line[i+1:], true
		}
	}
	return "", "", false
}

// SpanAttribute sets the attribute `guest.<name>` of this reconcile's span to value when the
// host traces reconciles (OpenTelemetry; otherwise a debug line of the host's log). name is
// 1–64 ASCII letters, digits, '_', '.' or '-'. It logs `span.attribute <name>=<value>`.
func SpanAttribute(name, value string) {
	current.Log(slog.LevelDebug, "span.attribute "+name+"="+value)
}
