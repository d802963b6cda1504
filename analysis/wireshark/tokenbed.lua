-- tokenbed.lua: Wireshark/tshark dissector for tokenbed datagrams, wire
-- format version 2 (agent/wire/doc.go is the definition; this file mirrors
-- wire.Decode check by check, so that a datagram the agents reject shows
-- here as malformed with the same field, offset and reason).
--
-- Use (Wireshark >= 3.x, tested with tshark 4.0):
--
--   tshark -X lua_script:analysis/wireshark/tokenbed.lua -r FILE.pcapng
--   tshark -X lua_script:analysis/wireshark/tokenbed.lua -r FILE.pcapng \
--       -Y tokenbed -T fields -e frame.interface_name -e tokenbed.type \
--       -e tokenbed.sender -e tokenbed.session -e tokenbed.nonce
--
-- The datagrams are decoded on UDP port 7400; another port:
-- -o tokenbed.port:7401. Malformed datagrams carry tokenbed.error
-- ("FIELD at offset N: REASON", as in wire.Error) and an expert item
-- (filter: tokenbed.error or _ws.expert.group == "Malformed").
-- Harness annotations in the same capture are on the "harness" interface:
-- exported PDUs dissected as JSON, the same JSON in frame.comment.

local tokenbed = Proto("tokenbed", "Tokenbed token passing (seed 002)")

local MAX_SIZE = 1232
local SIG_LEN = 64
local FIXED_HEADER = 6
local MAX_NAME = 63
local MAX_CERT = 1024
local MAX_ENTRIES = 32
local FLAG_CERT = 0x01
local FLAG_DIR = 0x02
local FLAG_PASS_ID = 0x04 -- the 3-way exchange's pass id (004 §4)

local type_names = { [1] = "Move", [2] = "Ack", [3] = "Commit", [4] = "EarlyStop" }

local f = {
	magic        = ProtoField.string("tokenbed.magic", "Magic"),
	version      = ProtoField.uint8("tokenbed.version", "Version", base.DEC),
	type         = ProtoField.uint8("tokenbed.type", "Type", base.DEC, type_names),
	flags        = ProtoField.uint8("tokenbed.flags", "Flags", base.HEX),
	flag_cert    = ProtoField.bool("tokenbed.flags.cert", "Certificate present", 8, nil, FLAG_CERT),
	flag_dir     = ProtoField.bool("tokenbed.flags.dir", "Directory present", 8, nil, FLAG_DIR),
	flag_pass_id = ProtoField.bool("tokenbed.flags.pass_id", "Pass id present", 8, nil, FLAG_PASS_ID),
	sender_len   = ProtoField.uint8("tokenbed.sender_len", "Sender name length", base.DEC),
	sender       = ProtoField.string("tokenbed.sender", "Sender"),
	token        = ProtoField.string("tokenbed.token", "Token (GEN@ORIGIN)"),
	token_gen    = ProtoField.int64("tokenbed.token_gen", "Token generation time (ns since the epoch)", base.DEC),
	token_time   = ProtoField.absolute_time("tokenbed.token_gen_time", "Token generation time", base.UTC),
	origin_len   = ProtoField.uint8("tokenbed.token_origin_len", "Token origin length", base.DEC),
	token_origin = ProtoField.string("tokenbed.token_origin", "Token origin"),
	session      = ProtoField.uint64("tokenbed.session", "Session", base.DEC),
	nonce        = ProtoField.uint64("tokenbed.nonce", "Nonce", base.DEC),
	reply_port   = ProtoField.uint16("tokenbed.reply_port", "Reply port", base.DEC),
	pass_id      = ProtoField.uint64("tokenbed.pass_id", "Pass id (3-way exchange, 004 §4)", base.HEX),
	cert_len     = ProtoField.uint16("tokenbed.cert_len", "Certificate length", base.DEC),
	cert         = ProtoField.bytes("tokenbed.cert", "Certificate (DER)"),
	dir_count    = ProtoField.uint8("tokenbed.dir_count", "Directory entries", base.DEC),
	dir          = ProtoField.none("tokenbed.dir", "Directory entry"),
	dir_name_len = ProtoField.uint8("tokenbed.dir.name_len", "Name length", base.DEC),
	dir_name     = ProtoField.string("tokenbed.dir.name", "Name"),
	dir_addr_len = ProtoField.uint8("tokenbed.dir.addr_len", "Address length", base.DEC),
	dir_addr     = ProtoField.string("tokenbed.dir.addr", "Address"),
	dir_ipv4     = ProtoField.ipv4("tokenbed.dir.ipv4", "IPv4 address"),
	dir_ipv6     = ProtoField.ipv6("tokenbed.dir.ipv6", "IPv6 address"),
	dir_port     = ProtoField.uint16("tokenbed.dir.port", "Port", base.DEC),
	dir_seen     = ProtoField.int64("tokenbed.dir.seen", "Signed at (ns since the epoch)", base.DEC),
	dir_seen_t   = ProtoField.absolute_time("tokenbed.dir.seen_time", "Signed at", base.UTC),
	dir_sig      = ProtoField.bytes("tokenbed.dir.signature", "Entry signature (Ed25519, by the member)"),
	signature    = ProtoField.bytes("tokenbed.signature", "Signature (Ed25519)"),
	error        = ProtoField.string("tokenbed.error", "Decoding error"),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
tokenbed.fields = field_list

local ef_malformed = ProtoExpert.new("tokenbed.malformed", "Malformed tokenbed datagram",
	expert.group.MALFORMED, expert.severity.ERROR)
tokenbed.experts = { ef_malformed }

tokenbed.prefs.port = Pref.uint("UDP port", 7400, "UDP port of the tokenbed agents")

local function valid_name(s)
	return #s >= 1 and #s <= MAX_NAME and s:match("^[A-Za-z0-9._-]+$") ~= nil
end

-- time_of returns an NSTime for ns since the epoch, or nil when it is not
-- a positive time.
local function time_of(ns)
	if ns <= Int64(0) then return nil end
	local secs = ns / 1000000000
	local rem = ns - secs * 1000000000
	return NSTime.new(secs:tonumber(), rem:tonumber())
end

function tokenbed.dissector(tvb, pinfo, tree)
	local n = tvb:len()
	if n == 0 then return 0 end
	pinfo.cols.protocol = "TOKENBED"
	local root = tree:add(tokenbed, tvb())

	-- The decoder state of wire.Decode: the first error wins.
	local err, err_off = nil, 0
	local blen = n - SIG_LEN
	local off = 0
	local function fail(field, at, reason)
		if err == nil then
			err = string.format("%s at offset %d: %s", field, at, reason)
			err_off = at
		end
	end
	local function take(field, k)
		if err ~= nil then return nil end
		if k < 0 or blen - off < k then
			fail(field, off, "truncated")
			return nil
		end
		local r = tvb(off, k)
		off = off + k
		return r
	end
	local function name(field, t, f_len, f_name)
		local lr = take(field .. ".length", 1)
		if lr == nil then return nil end
		t:add(f_len, lr)
		local k = lr:uint()
		if k == 0 or k > MAX_NAME then
			fail(field .. ".length", off, "bad-length")
			return nil
		end
		local at = off
		local r = take(field, k)
		if r == nil then return nil end
		t:add(f_name, r)
		if not valid_name(r:raw()) then
			off = at
			fail(field, at, "bad-name")
			return nil
		end
		return r:raw()
	end

	local typ, sender, gen, origin, session, nonce, pass_id
	local cert_present = false
	if n > MAX_SIZE then
		fail("datagram", MAX_SIZE, "too-large")
	elseif n < FIXED_HEADER + SIG_LEN then
		fail("datagram", n, "truncated")
	else
		local m = take("magic", 2)
		root:add(f.magic, m)
		if m:raw() ~= "TB" then
			fail("magic", 0, "bad-magic")
		end
		local vr = take("version", 1)
		if vr ~= nil then
			root:add(f.version, vr)
			if vr:uint() ~= 2 then fail("version", 2, "bad-version") end
		end
		local tr = take("type", 1)
		if tr ~= nil then
			root:add(f.type, tr)
			typ = tr:uint()
			if type_names[typ] == nil then fail("type", 3, "bad-type") end
		end
		local flags = 0
		local fr = take("flags", 1)
		if fr ~= nil then
			local ft = root:add(f.flags, fr)
			ft:add(f.flag_cert, fr)
			ft:add(f.flag_dir, fr)
			ft:add(f.flag_pass_id, fr)
			flags = fr:uint()
			local cont = typ == 1 or typ == 2
			if bit.band(flags, bit.bnot(FLAG_CERT + FLAG_DIR + FLAG_PASS_ID)) ~= 0 or
				(not cont and bit.band(flags, bit.bnot(FLAG_PASS_ID)) ~= 0) then
				fail("flags", 4, "bad-flags")
			end
		end
		local cont = typ == 1 or typ == 2
		sender = name("sender", root, f.sender_len, f.sender)
		local gen_at = off
		local gr = take("token.gen", 8)
		if gr ~= nil then
			gen = gr:int64()
			root:add(f.token_gen, gr)
			local tm = time_of(gen)
			if tm ~= nil then root:add(f.token_time, gr, tm):set_generated() end
		end
		origin = name("token.origin", root, f.origin_len, f.token_origin)
		if gen ~= nil and origin ~= nil then
			root:add(f.token, tvb(gen_at, 8 + 1 + #origin), tostring(gen) .. "@" .. origin):set_generated()
		end
		local sr = take("session", 8)
		if sr ~= nil then session = sr:uint64(); root:add(f.session, sr) end
		local nr = take("nonce", 8)
		if nr ~= nil then nonce = nr:uint64(); root:add(f.nonce, nr) end
		local pr = take("reply_port", 2)
		if pr ~= nil then
			root:add(f.reply_port, pr)
			if err == nil and cont ~= (pr:uint() ~= 0) then
				fail("reply_port", off - 2, "bad-port")
			end
		end
		if bit.band(flags, FLAG_PASS_ID) ~= 0 then
			local ir = take("pass_id", 8)
			if ir ~= nil then
				pass_id = ir:uint64()
				root:add(f.pass_id, ir)
				-- One encoding per datagram: no pass id is no flag.
				if err == nil and pass_id == UInt64(0) then
					fail("pass_id", off - 8, "bad-value")
				end
			end
		end
		if bit.band(flags, FLAG_CERT) ~= 0 then
			local cl = take("certificate.length", 2)
			local k = 0
			if cl ~= nil then
				root:add(f.cert_len, cl)
				k = cl:uint()
				if err == nil and (k == 0 or k > MAX_CERT) then
					fail("certificate.length", off - 2, "bad-length")
				end
			end
			local cr = take("certificate", k)
			if cr ~= nil then root:add(f.cert, cr); cert_present = true end
		end
		if bit.band(flags, FLAG_DIR) ~= 0 then
			local cr = take("directory.count", 1)
			local count = 0
			if cr ~= nil then
				root:add(f.dir_count, cr)
				count = cr:uint()
				if err == nil and (count == 0 or count > MAX_ENTRIES) then
					fail("directory.count", off - 1, "bad-length")
				end
			end
			local i = 0
			while i < count and err == nil do
				local start = off
				local et = root:add(f.dir, tvb(start, 1))
				local ename = name("directory.name", et, f.dir_name_len, f.dir_name)
				local alr = take("directory.addr.length", 1)
				local alen = 0
				if alr ~= nil then
					et:add(f.dir_addr_len, alr)
					alen = alr:uint()
					if err == nil and alen ~= 4 and alen ~= 16 then
						fail("directory.addr.length", off - 1, "bad-length")
					end
				end
				local ar = take("directory.addr", alen)
				local portr = take("directory.port", 2)
				local seenr = take("directory.seen", 8)
				local esigr = take("directory.signature", SIG_LEN)
				if err == nil then
					local text
					if alen == 4 then
						et:add(f.dir_ipv4, ar)
						text = tostring(ar:ipv4())
					else
						local raw = ar:raw()
						if raw:sub(1, 12) == "\0\0\0\0\0\0\0\0\0\0\255\255" then
							-- One encoding per address: IPv4 travels as 4 bytes.
							fail("directory.addr", off - 10 - SIG_LEN - alen, "bad-addr")
							break
						end
						et:add(f.dir_ipv6, ar)
						text = tostring(ar:ipv6())
					end
					et:add(f.dir_addr, ar, text)
					et:add(f.dir_port, portr)
					et:add(f.dir_seen, seenr)
					local tm = time_of(seenr:int64())
					if tm ~= nil then et:add(f.dir_seen_t, seenr, tm):set_generated() end
					et:add(f.dir_sig, esigr)
					et:set_len(off - start)
					et:append_text(string.format(": %s %s port %d", ename, text, portr:uint()))
				end
				i = i + 1
			end
		end
		if err == nil and off ~= blen then
			fail("datagram", off, "trailing-bytes")
		end
		root:add(f.signature, tvb(blen, SIG_LEN))
	end

	if err ~= nil then
		local item = root:add(f.error, err)
		item:set_generated()
		item:add_proto_expert_info(ef_malformed, "Malformed tokenbed datagram: " .. err)
		pinfo.cols.info = "Tokenbed malformed: " .. err
		root:append_text(", malformed: " .. err)
		return n
	end

	local tname = type_names[typ]
	local info = string.format("%s from %s token %s@%s session %s%s nonce %s%s", tname, sender,
		tostring(gen), origin, tostring(session), pass_id and (" pass " .. pass_id:tohex()) or "",
		tostring(nonce), cert_present and " +cert" or "")
	pinfo.cols.info = info
	root:append_text(string.format(", %s from %s, session %s", tname, sender, tostring(session)))
	return n
end

local registered_port = tokenbed.prefs.port
DissectorTable.get("udp.port"):add(registered_port, tokenbed)

function tokenbed.prefs_changed()
	if registered_port ~= tokenbed.prefs.port then
		local t = DissectorTable.get("udp.port")
		t:remove(registered_port, tokenbed)
		registered_port = tokenbed.prefs.port
		t:add(registered_port, tokenbed)
	end
end
