"""clnode's own declarations of XLA's FFI C ABI (python/clnode/_xla_ffi.h) against the installed
jaxlib's xla/ffi/api/c_api.h: a C program including both checks every declared struct's size,
every member's offset and every enum value the handlers use, compiled with the system's C
compiler. The two prefix structs (XLA's function table, of which clnode declares the entries up
to the stream's, and the metadata, whose documented size ends at its traits) are checked for
their members' offsets and against XLA's documented sizes."""
import os
import shutil
import subprocess

import pytest

jax = pytest.importorskip("jax")

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "..", "python", "clnode", "_xla_ffi.h")

# (clnode's struct, XLA's, [(clnode's member, XLA's member)], whole: sizes compared)
STRUCTS = [
    ("cxf_extension", "XLA_FFI_Extension_Base",
     [("struct_size", "struct_size"), ("type", "type"), ("next", "next")], True),
    ("cxf_api_version", "XLA_FFI_Api_Version",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"),
      ("major_version", "major_version"), ("minor_version", "minor_version")], True),
    ("cxf_error_create_args", "XLA_FFI_Error_Create_Args",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"),
      ("message", "message"), ("errc", "errc")], True),
    ("cxf_buffer", "XLA_FFI_Buffer",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"),
      ("dtype", "dtype"), ("data", "data"), ("rank", "rank"), ("dims", "dims")], True),
    ("cxf_bytes", "XLA_FFI_ByteSpan", [("ptr", "ptr"), ("len", "len")], True),
    ("cxf_scalar", "XLA_FFI_Scalar", [("dtype", "dtype"), ("value", "value")], True),
    ("cxf_args", "XLA_FFI_Args",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"), ("size", "size"),
      ("types", "types"), ("args", "args")], True),
    ("cxf_rets", "XLA_FFI_Rets",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"), ("size", "size"),
      ("types", "types"), ("rets", "rets")], True),
    ("cxf_attrs", "XLA_FFI_Attrs",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"), ("size", "size"),
      ("types", "types"), ("names", "names"), ("attrs", "attrs")], True),
    ("cxf_call_frame", "XLA_FFI_CallFrame",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"), ("api", "api"),
      ("ctx", "ctx"), ("stage", "stage"), ("args", "args"), ("rets", "rets"),
      ("attrs", "attrs")], False),
    ("cxf_stream_get_args", "XLA_FFI_Stream_Get_Args",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"), ("ctx", "ctx"),
      ("stream", "stream")], True),
    ("struct cxf_api", "XLA_FFI_Api",
     [("struct_size", "struct_size"), ("extension_start", "extension_start"),
      ("api_version", "api_version"), ("internal_api", "internal_api"),
      ("error_create", "XLA_FFI_Error_Create"), ("error_get_message", "XLA_FFI_Error_GetMessage"),
      ("error_destroy", "XLA_FFI_Error_Destroy"),
      ("handler_register", "XLA_FFI_Handler_Register"), ("stream_get", "XLA_FFI_Stream_Get")],
     False),
    ("cxf_metadata", "XLA_FFI_Metadata",
     [("struct_size", "struct_size"), ("api_version", "api_version"), ("traits", "traits")],
     False),
    ("cxf_metadata_extension", "XLA_FFI_Metadata_Extension",
     [("extension_base", "extension_base"), ("metadata", "metadata")], True),
]
ENUMS = [("CXF_EXTENSION_METADATA", "XLA_FFI_Extension_Metadata"),
         ("CXF_OK", "XLA_FFI_Error_Code_OK"), ("CXF_CANCELLED", "XLA_FFI_Error_Code_CANCELLED"),
         ("CXF_UNKNOWN", "XLA_FFI_Error_Code_UNKNOWN"),
         ("CXF_INVALID_ARGUMENT", "XLA_FFI_Error_Code_INVALID_ARGUMENT"),
         ("CXF_NOT_FOUND", "XLA_FFI_Error_Code_NOT_FOUND"),
         ("CXF_RESOURCE_EXHAUSTED", "XLA_FFI_Error_Code_RESOURCE_EXHAUSTED"),
         ("CXF_FAILED_PRECONDITION", "XLA_FFI_Error_Code_FAILED_PRECONDITION"),
         ("CXF_UNIMPLEMENTED", "XLA_FFI_Error_Code_UNIMPLEMENTED"),
         ("CXF_INTERNAL", "XLA_FFI_Error_Code_INTERNAL"),
         ("CXF_UNAVAILABLE", "XLA_FFI_Error_Code_UNAVAILABLE"),
         ("CXF_PRED", "XLA_FFI_DataType_PRED"), ("CXF_S32", "XLA_FFI_DataType_S32"),
         ("CXF_S64", "XLA_FFI_DataType_S64"), ("CXF_F32", "XLA_FFI_DataType_F32"),
         ("CXF_F64", "XLA_FFI_DataType_F64"), ("CXF_ARG_BUFFER", "XLA_FFI_ArgType_BUFFER"),
         ("CXF_RET_BUFFER", "XLA_FFI_RetType_BUFFER"),
         ("CXF_ATTR_SCALAR", "XLA_FFI_AttrType_SCALAR"),
         ("CXF_ATTR_STRING", "XLA_FFI_AttrType_STRING"),
         ("CXF_STAGE_EXECUTE", "XLA_FFI_ExecutionStage_EXECUTE")]


def _program():
    lines = ['#include <stdio.h>', '#include "xla/ffi/api/c_api.h"', f'#include "{HEADER}"',
             "#define CHECK(what, a, b) do { if ((size_t)(a) != (size_t)(b)) { "
             'printf("%s: clnode %zu, jaxlib %zu\\n", what, (size_t)(a), (size_t)(b)); '
             "bad = 1; } } while (0)",
             "int main(void) {", "    int bad = 0;"]
    for ours, theirs, members, whole in STRUCTS:
        if whole:
            lines.append(f'    CHECK("sizeof {ours}", sizeof({ours}), sizeof({theirs}));')
        for a, b in members:
            lines.append(f'    CHECK("{ours}.{a}", offsetof({ours}, {a}), offsetof({theirs}, {b}));')
            lines.append(f'    CHECK("sizeof {ours}.{a}", sizeof((({ours} *)0)->{a}), '
                         f'sizeof((({theirs} *)0)->{b}));')
    # the documented sizes of the prefix structs cover what clnode reads
    lines.append('    CHECK("cxf_metadata size", offsetof(cxf_metadata, traits) + '
                 'sizeof(uint32_t), XLA_FFI_Metadata_STRUCT_SIZE);')
    lines.append('    CHECK("cxf_call_frame covers attrs", offsetof(cxf_call_frame, attrs) + '
                 'sizeof(cxf_attrs), offsetof(XLA_FFI_CallFrame, attrs) + sizeof(XLA_FFI_Attrs));')
    for ours, theirs in ENUMS:
        lines.append(f'    CHECK("{ours}", {ours}, {theirs});')
    lines.append('    printf("API %d.%d\\n", XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);')
    lines.append("    return bad;\n}")
    return "\n".join(lines) + "\n"


def test_declarations_match_the_installed_jaxlib(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    include = jax.ffi.include_dir()
    if not os.path.exists(os.path.join(include, "xla", "ffi", "api", "c_api.h")):
        pytest.skip("this jaxlib ships no xla/ffi/api/c_api.h")
    src = tmp_path / "abi.c"
    src.write_text(_program())
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", include, str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
    major, minor = map(int, out.stdout.split()[-1].split("."))
    from clnode import _clnode
    need = _clnode._xla()["api"]
    assert major == need[0] and minor >= need[1], (out.stdout, need)


def test_an_old_jaxlib_is_refused_naming_both_versions():
    from clnode.jax import _ffi
    with pytest.raises(ImportError, match=r"jaxlib >= 0\.5\.0.*this jaxlib is 0\.4\.38"):
        _ffi.check_jaxlib("0.4.38")
    _ffi.check_jaxlib("0.10.2")
