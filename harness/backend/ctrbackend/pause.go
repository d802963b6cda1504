package ctrbackend

import (
	"encoding/binary"
	"fmt"
	"runtime"
)

// The pod holder's program: a process that does nothing but keep its
// network namespace alive, as Kubernetes' pause container does. The agent
// image is FROM scratch (no registry to pull a base image from) and holds
// only the static agent binary, so the holder's program is written here:
// a static ELF executable of one page whose code is a loop around a
// blocking system call. It uses no memory, opens no file and never exits;
// SIGKILL (docker kill, docker rm -f) ends it.
//
// Equivalent to (x86-64 assembly):
//
//	_start: mov eax, 34   ; pause(2)
//	        syscall
//	        jmp _start

// elfBase is where the single loadable segment is mapped (the classic
// static-executable base, above mmap_min_addr).
const elfBase = 0x400000

// pauseCode is the loop's machine code, by GOARCH.
var pauseCode = map[string]struct {
	machine uint16 // ELF e_machine
	code    []byte
}{
	"amd64": {
		machine: 62, // EM_X86_64
		code: []byte{
			0xb8, 0x22, 0x00, 0x00, 0x00, // mov eax, 34 (__NR_pause)
			0x0f, 0x05, // syscall
			0xeb, 0xf7, // jmp -9 (back to mov)
		},
	},
}

// PauseProgram returns the holder program for goarch (runtime.GOARCH when
// empty): an ELF64 header, one PT_LOAD program header covering the whole
// file, and the code.
func PauseProgram(goarch string) ([]byte, error) {
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	pc, ok := pauseCode[goarch]
	if !ok {
		return nil, fmt.Errorf("ctrbackend: no pod holder program for GOARCH %s (have amd64); use --backend netns", goarch)
	}
	const ehsize, phsize = 64, 56
	total := ehsize + phsize + len(pc.code)
	b := make([]byte, 0, total)
	le := binary.LittleEndian
	// e_ident: magic, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE.
	b = append(b, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	b = le.AppendUint16(b, 2) // e_type ET_EXEC
	b = le.AppendUint16(b, pc.machine)
	b = le.AppendUint32(b, 1)                     // e_version
	b = le.AppendUint64(b, elfBase+ehsize+phsize) // e_entry: the code
	b = le.AppendUint64(b, ehsize)                // e_phoff
	b = le.AppendUint64(b, 0)                     // e_shoff: no sections
	b = le.AppendUint32(b, 0)                     // e_flags
	b = le.AppendUint16(b, ehsize)                // e_ehsize
	b = le.AppendUint16(b, phsize)                // e_phentsize
	b = le.AppendUint16(b, 1)                     // e_phnum
	b = le.AppendUint16(b, 0)                     // e_shentsize
	b = le.AppendUint16(b, 0)                     // e_shnum
	b = le.AppendUint16(b, 0)                     // e_shstrndx
	// Program header: PT_LOAD, PF_R|PF_X, the whole file at elfBase.
	b = le.AppendUint32(b, 1)
	b = le.AppendUint32(b, 5)
	b = le.AppendUint64(b, 0)       // p_offset
	b = le.AppendUint64(b, elfBase) // p_vaddr
	b = le.AppendUint64(b, elfBase) // p_paddr
	b = le.AppendUint64(b, uint64(total))
	b = le.AppendUint64(b, uint64(total))
	b = le.AppendUint64(b, 0x1000) // p_align
	return append(b, pc.code...), nil
}
